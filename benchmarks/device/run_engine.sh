#!/usr/bin/env bash
# Device command 1 (carry .device/wheels .device/tvm .device/corpus): the GPU tests, the
# server's tests, the cold first batch and the builder benchmark without TVM's compiler
# library (runtime-only TVM has PopenPoolExecutor). Outputs go to $OUT.
. benchmarks/device/setup.sh
nvidia-smi -L | tee "$OUT/gpu.txt"
python3 -c "import asynccomp, anyio, cuda.bindings, platform; print(platform.python_version(), anyio.__name__)" 2>&1 | tee -a "$OUT/gpu.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/gpu tests/test_server.py tests/test_tvm_builder.py \
  2>&1 | tail -15 | tee "$OUT/pytest.txt"
timeout 150 python3 -m benchmarks.compile.cold_batch --corpus .device/corpus --largest 16 --workers 16 --trials 2 \
  2>&1 | tee "$OUT/cold_batch16.txt"
timeout 200 python3 -m benchmarks.tuners.ms_callbacks --corpus .device/corpus --batches 3 --workers 16 \
  --configs noop,asynccomp,engine --json "$OUT/builder16_runtime.json" 2>&1 | tee "$OUT/builder16_runtime.txt"
