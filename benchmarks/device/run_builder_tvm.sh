#!/usr/bin/env bash
# Device command 3 (carry .device/tvmlib/part2 .device/corpus, within 30 s of command 2,
# which carried part1): full TVM, then the builder benchmark with TVM's own callback beside
# asynccomp, the pool's floor and one engine, interleaved. Outputs go to $OUT.
. benchmarks/device/setup.sh
python3 -c "import tvm; from tvm.s_tir import meta_schedule; print('full TVM', tvm.__version__)" 2>&1 | tee "$OUT/tvm.txt"
timeout 500 python3 -m benchmarks.tuners.ms_callbacks --corpus .device/corpus --batches 3 --workers 16 \
  --configs noop,tvm,asynccomp,engine --json "$OUT/builder16.json" 2>&1 | tee "$OUT/builder16.txt"
