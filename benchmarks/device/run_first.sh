#!/usr/bin/env bash
# The FIRST command on a fresh GPU machine (carry .device/wheels .device/corpus .device/tvm
# .device/tvmlib/part1): what a tuning run's first batch costs there (issue 36).
#   1. benchmarks/compile/first_batch.py: three fresh processes, each starting an engine
#      (its NVRTC template in the background), rendering the corpus as TVM hands it over,
#      then one batch (from the engine's start: "cold") and two batches of new sources
#      ("warm"); the first trial is the fresh machine's.
#   2. asynccomp bench, processes x16: its cold pass (engine start and first pass) and
#      its timed passes (fresh sources each).
# It also copies TVM's first half to /tmp (setup.sh): a command within 30 s that carries
# .device/tvmlib/part2 has full TVM (run_ms_builder.sh).
. benchmarks/device/setup.sh
nvidia-smi -L | tee "$OUT/gpu.txt"
uptime | tee -a "$OUT/gpu.txt"
timeout 240 python3 -m benchmarks.compile.first_batch --corpus .device/corpus --workers 16 \
  --trials 3 --json "$OUT/first_batch16.json" 2>&1 | tee "$OUT/first_batch16.txt"
timeout 200 python3 -m asynccomp bench --corpus .device/corpus --configs processes --workers 16 \
  --repeat 3 --warmup 0 --json "$OUT/bench_processes16.json" 2>&1 | tail -25 \
  | tee "$OUT/bench_processes16.txt"
# 3. benchmarks/compile/shared_pch.py: one precompiled header shared by the NVRTC workers
#    forked from one template, against one per worker (two batches of 64, then a new
#    worker's first compile).
timeout 200 python3 -m benchmarks.compile.shared_pch --workers 16 --jobs 64 --pairs 2 \
  --json "$OUT/shared_pch16.json" 2>&1 | tail -12 | tee "$OUT/shared_pch16.txt"
