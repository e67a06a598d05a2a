#!/usr/bin/env bash
# Device command (carry .device/wheels .device/tvm .device/corpus .device/tvmlib/part1):
# the builder benchmark on runtime-only TVM (PopenPoolExecutor), without TVM's own
# callback, which needs the compiler library (run_builder_tvm.sh).
. benchmarks/device/setup.sh
timeout 250 python3 -m benchmarks.tuners.ms_callbacks --corpus .device/corpus --batches 3 --workers 16 \
  --configs noop,asynccomp,engine --json "$OUT/builder16_runtime.json" 2>&1 | tee "$OUT/builder16_runtime.txt"
