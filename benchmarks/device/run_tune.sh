#!/usr/bin/env bash
# Device command 4 (within 30 s of command 3: full TVM still in /tmp/site): a real
# MetaSchedule tune_tir with TVM's own callback and with asynccomp's initializer line.
. benchmarks/device/setup.sh
for callback in ${CALLBACKS:-tvm asynccomp}; do
  timeout 280 python3 benchmarks/tune_tir.py --callback "$callback" --trials 64 --workers 16 \
    --json "$OUT/tune_$callback.json" > "$OUT/tune_$callback.log" 2>&1
  tail -25 "$OUT/tune_$callback.log"
done
