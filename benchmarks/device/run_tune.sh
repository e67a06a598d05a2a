#!/usr/bin/env bash
# Device command (carry .device/tvmlib/part2, within 30 s of a command that carried
# part1): full TVM, then a real MetaSchedule tune_tir with asynccomp's initializer line
# and with TVM's own callback (each builder candidate traced: whole build, compile part).
. benchmarks/device/setup.sh
for callback in ${CALLBACKS:-asynccomp tvm}; do
  timeout 280 python3 benchmarks/tune_tir.py --callback "$callback" --trials 64 --workers 16 \
    --json "$OUT/tune_$callback.json" > "$OUT/tune_$callback.log" 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('builds'); print(json.dumps(d))" "$OUT/tune_$callback.json"
done
