#!/usr/bin/env bash
# NVRTC's own cache on the GPU machine (issue 36): a fresh machine's first batch of the 60
# corpus kernels took 12-21 s against 0.6-0.9 s "warm", and the first batch wrote ~115
# files into ~/.nv/ComputeCache: NVRTC 13 caches compiled programs there when a driver is
# loaded. Carry .device/wheels .device/corpus.tar.xz.
#   1. benchmarks/compile/nvrtc_cache.py: which changes miss that cache (a comment? a -D?);
#   2. asynccomp bench (TVM's callback against 16 worker processes) with the cache off
#      (CUDA_CACHE_DISABLE=1): every pass compiles;
#   3. the same with the cache on, in a new cache folder: what the earlier figures measured.
set -uo pipefail
export OUT
. benchmarks/device/setup.sh
nvidia-smi -L; uptime
timeout 150 python3 -m benchmarks.compile.nvrtc_cache --corpus .device/corpus --largest 1 \
  --json "$OUT/nvrtc_cache.json" 2>&1 | tail -5 | tee "$OUT/nvrtc_cache.txt"
for cache in off on; do
  if [ "$cache" = off ]; then export CUDA_CACHE_DISABLE=1; else unset CUDA_CACHE_DISABLE
    export CUDA_CACHE_PATH; CUDA_CACHE_PATH=$(mktemp -d); fi
  echo "== bench, NVRTC's cache $cache"
  timeout "${BENCH_TIMEOUT:-240}" python3 -m asynccomp bench --corpus .device/corpus \
    --configs tvm,processes --workers 16 --repeat 1 --warmup 1 \
    --json "$OUT/bench_cache_$cache.json" 2>"$OUT/bench_cache_$cache.err" | tee "$OUT/bench_cache_$cache.txt"
done
