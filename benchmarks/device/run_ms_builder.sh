#!/usr/bin/env bash
# Device command (carry .device/wheels .device/tvm.tar.xz .device/tvmlib/part2, within 30 s
# of a command that carried part1, e.g. run_first_call.sh; see setup.sh): full TVM, then
# 1. benchmarks/tuners/ms_builders.py: 60 fresh ReplayTrace candidates of a 1024^3 matmul, 3
#    batches on 16 workers, LocalBuilder (asynccomp's callback) against
#    asynccomp.tvm.Builder; goal: later batches of the warm builder within 1.5 s, the same
#    CUDA source for every candidate; a candidate that outlasts the 30 s timeout fails in
#    every batch of both builders, so the warm one then also builds the rest alone
#    ("built_only"); LocalBuilder one batch (its batches are alike: a fresh pool each);
# 2. real tune_tir runs (64 trials, 16 workers), LocalBuilder with TVM's callback, with
#    asynccomp's, and asynccomp.tvm.Builder; goal for the warm one: 0 candidates lost,
#    builder stage <= 20 s. Within the 10-minute limit: 220 s + 2 x 170 s (CALLBACKS="warm tvm";
#    run again with CALLBACKS=asynccomp for LocalBuilder with asynccomp's callback).
# Last run on 2026-12-06 (RESULTS.md, "MetaSchedule's builder (issues 35, 36)").
. benchmarks/device/setup.sh
cat "$SITE"/tvm/lib/*.so > /dev/null
python3 -m asynccomp compile --examples --arch sm_90a --no-server --no-cache > /dev/null 2>&1
timeout 220 python3 -m benchmarks.tuners.ms_builders --fresh 60 --size 1024 --batches 3 --workers 16 \
  --local-batches 1 --json "$OUT/ms_builder16.json" > "$OUT/ms_builder16.log" 2>&1
tail -1 "$OUT/ms_builder16.log"
i=0
for callback in ${CALLBACKS:-warm tvm}; do
  i=$((i + 1))
  timeout 170 python3 -m benchmarks.tuners.ms_tune_tir --callback "$callback" --trials 64 --workers 16 \
    --json "$OUT/tune_${i}_$callback.json" > "$OUT/tune_${i}_$callback.log" 2>&1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); b=d.pop('builds'); d.pop('batches'); print(json.dumps(d)); print(sorted((x['build'], x['compile']) for x in b)[-5:])" "$OUT/tune_${i}_$callback.json"
done
