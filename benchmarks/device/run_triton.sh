#!/usr/bin/env bash
# asynccomp.triton on the GPU machine (one H200, 16 cores, Python 3.12, torch 2.11 and
# Triton 3.6 on its image): tests/test_triton.py (its GPU test included), then
# benchmarks/tuners/triton_sweep.py:
#   --gpu     the first call of a 64-config @triton.autotune matmul (compile + benchmark),
#             Triton's own vs asynccomp.triton.register()'s, each in a fresh process with
#             an empty Triton cache: seconds, the same best config given the same
#             timings, every config's cubin and output the same, close to torch's;
#   --no-gpu  16 compiles of it: triton.compile in turn vs compile_many (16 cores).
# What the image lacks (apache-tvm-ffi, platformdirs, pytest-asyncio, cloudpickle...)
# comes from .device/wheels (bash benchmarks/device/prepare.sh here first); carry it:
#   carry .device/wheels:   bash benchmarks/device/run_triton.sh [--workers N]
# CONFIGS (64), REPEAT (2: the GPU comparison, each time both modes), SKIP_TESTS=1,
# SKIP_CPU=1 narrow it. Arguments go to the --gpu sweep.
set -uo pipefail
. benchmarks/device/setup.sh
export PATH="$SITE/bin:$PATH"
OUT="${OUT:-/tmp/triton-out}"
mkdir -p "$OUT"
nvidia-smi -L | tee "$OUT/gpu.txt"
python3 -c "import sys, os, triton, torch; print(sys.version.split()[0], 'triton', \
triton.__version__, 'torch', torch.__version__, torch.cuda.is_available(), \
len(os.sched_getaffinity(0)), 'cpus')" 2>&1 | tee -a "$OUT/gpu.txt"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout 240 python3 -m pytest -q -p no:cacheprovider -n 0 -rs tests/test_triton.py \
    2>&1 | tail -15 | tee "$OUT/pytest_triton.txt"
fi
for i in $(seq "${REPEAT:-2}"); do
  echo "== --gpu, run $i (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/triton_sweep.txt"
  timeout 400 python3 -m benchmarks.tuners.triton_sweep --gpu --configs "${CONFIGS:-64}" \
    --json "$OUT/triton_autotune_$i.json" "$@" 2>&1 | tee -a "$OUT/triton_sweep.txt"
done
if [ "${SKIP_CPU:-0}" != 1 ]; then
  echo "== --no-gpu (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/triton_sweep.txt"
  timeout 200 python3 -m benchmarks.tuners.triton_sweep --no-gpu --configs 16 --repeat 2 \
    --json "$OUT/triton_compile.json" 2>&1 | tee -a "$OUT/triton_sweep.txt"
fi
