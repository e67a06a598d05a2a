#!/usr/bin/env bash
# The FIRST command on a fresh GPU machine when device time is short: the most important
# measurements of issues 35, 36 and 38 in one command (carry .device/wheels .device/corpus
# .device/ray-site.tar.xz; prepare.sh makes them. With .device/corpus.tar.xz instead of
# the corpus, .device/tvmlib/part1 fits beside them, and a MetaSchedule command carrying
# .device/wheels .device/tvm.tar.xz .device/tvmlib/part2 can follow within 30 s):
#   1. benchmarks/device/first_touch.py: does a fresh machine give its processes memory,
#      or disk blocks, slowly the first time (its first batch took 11-21 s against 0.57 s
#      warm)? (Memory was not it on 2026-12-07: 16 GiB in 0.98 s.)
#   2. benchmarks/compile/first_batch.py: the 60 corpus kernels' first batch of two fresh
#      processes (the first one the machine's) against their warm batches;
#   3. run_triton.sh: a 64-config @triton.autotune's first call, Triton's own against
#      asynccomp's screened modes (TRITON=0 leaves it out: measured on 2026-12-07);
#   4. run_tests.sh: the whole suite (Ray included), with the time that is left of the
#      command's 600 s (the log names each test's outcome as it ends, if it is cut).
# Everything goes to $OUT.
set -uo pipefail
export OUT
. benchmarks/device/setup.sh
nvidia-smi -L | tee "$OUT/machine.txt"
{ uptime; free -g; } | tee -a "$OUT/machine.txt"
if [ "${TOUCH:-1}" = 1 ]; then  # TOUCH=0 leaves it out, when device time is short
  timeout 120 python3 benchmarks/device/first_touch.py --disk-mib 128 | tee "$OUT/first_touch.txt"
fi
# What else runs on the machine while its first batch does (a booting image's services?):
# the busiest processes each second for 25 s.
( for _ in $(seq 25); do date +%T; head -c 40 /proc/loadavg; echo
    ps -eo pcpu,rss,etimes,comm --sort=-pcpu 2>/dev/null | head -8; sleep 1; done \
  > "$OUT/during_first_batch.txt" 2>&1 & )
timeout 150 python3 -m benchmarks.compile.first_batch --corpus .device/corpus --workers 16 \
  --trials "${FIRST_TRIALS:-2}" --json "$OUT/first_batch16.json" 2>&1 | tail -20 | tee "$OUT/first_batch16.txt"
if [ "${TRITON:-1}" = 1 ]; then
  SKIP_TESTS=1 SKIP_CPU=1 REPEAT=1 timeout 240 bash benchmarks/device/run_triton.sh \
    --modes triton,asynccomp-screen,asynccomp-screen-warm,asynccomp-screen-early 2>&1 | tail -40
fi
left=$((${BUDGET_S:-575} - SECONDS))
echo "== the suite, $left s left"
if [ "$left" -gt 60 ]; then
  SUITE_TIMEOUT="$left" bash benchmarks/device/run_tests.sh -n "${SUITE_WORKERS:-8}" --timeout 200 2>&1 | tail -30
fi
