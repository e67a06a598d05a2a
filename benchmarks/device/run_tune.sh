#!/usr/bin/env bash
# Device command (carry .device/tvmlib/part2, within 30 s of a command that carried
# part1): full TVM, then real MetaSchedule tune_tir runs, in the order $CALLBACKS says
# (each builder candidate traced: whole build, compile part). First an untimed warm-up
# of the machine (the libraries read once, NVRTC run once on every core): the first runs
# on a fresh machine are much slower, whichever callback they use.
. benchmarks/device/setup.sh
cat "$SITE"/tvm/lib/*.so > /dev/null
python3 -m asynccomp compile --examples --arch sm_90a --no-server --no-cache > /dev/null 2>&1
i=0
for callback in ${CALLBACKS:-tvm asynccomp asynccomp}; do
  i=$((i + 1))
  timeout 200 python3 -m benchmarks.tuners.ms_tune_tir --callback "$callback" --trials 64 --workers 16 \
    --json "$OUT/tune_${i}_$callback.json" > "$OUT/tune_${i}_$callback.log" 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); b=d.pop('builds'); d.pop('batches'); print(json.dumps(d)); print(sorted((x['build'], x['compile']) for x in b)[-5:])" "$OUT/tune_${i}_$callback.json"
done
