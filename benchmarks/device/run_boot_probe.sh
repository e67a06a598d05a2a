#!/usr/bin/env bash
# Issue 36 on a FRESH GPU machine (the first command after it starts): is the machine slow
# for a while after boot, or are the first compiles? Carry .device/wheels
# .device/corpus.tar.xz.
#   1. benchmarks/device/cpu_sampler.py from the command's first second to its end: a
#      fixed loop's and a fresh 32 MiB's milliseconds against the machine's uptime;
#   2. 20 s of the sampler alone, then benchmarks/compile/first_batch.py (two fresh
#      processes, 16 workers) while it samples on;
#   3. the files the first batch wrote anywhere on the machine (a cache NVRTC keeps?).
# Everything goes to $OUT: cpu_samples.txt, machine.txt, first_batch16.{txt,json},
# written.txt, during_first_batch.txt.
set -uo pipefail
export OUT
python3 benchmarks/device/cpu_sampler.py --seconds "${SAMPLE_S:-150}" > "$OUT/cpu_samples.txt" 2>&1 &
sampler=$!
. benchmarks/device/setup.sh
{ nvidia-smi -L; uptime; echo "uptime $(cut -d' ' -f1 /proc/uptime)"; nproc
  grep -m1 "model name" /proc/cpuinfo; grep MHz /proc/cpuinfo | sort | uniq -c | head -5
  ls /sys/devices/system/cpu/cpu0/cpufreq 2>&1 | head -3; cat /proc/pressure/cpu 2>&1
  systemd-detect-virt 2>&1; } > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"
sleep "${ALONE_S:-20}"
touch /tmp/before-first-batch
( for _ in $(seq 25); do date +%T; head -c 40 /proc/loadavg; echo
    ps -eo pcpu,rss,etimes,comm --sort=-pcpu 2>/dev/null | head -8; sleep 1; done \
  > "$OUT/during_first_batch.txt" 2>&1 & )
echo "first batch from uptime $(cut -d' ' -f1 /proc/uptime)"
timeout 150 python3 -m benchmarks.compile.first_batch --corpus .device/corpus --workers 16 \
  --trials "${FIRST_TRIALS:-2}" --json "$OUT/first_batch16.json" 2>&1 | tail -20 | tee "$OUT/first_batch16.txt"
echo "done at uptime $(cut -d' ' -f1 /proc/uptime)"
timeout 40 find / \( -path /proc -o -path /sys -o -path /dev -o -path "$OUT" \) -prune \
  -o -newer /tmp/before-first-batch -type f -print 2>/dev/null | head -200 > "$OUT/written.txt"
echo "files written during the batch: $(wc -l < "$OUT/written.txt")"; head -30 "$OUT/written.txt"
sleep 5
kill "$sampler" 2>/dev/null
awk '{ b = int($1 / 5) * 5; n[b]++; l[b] += $2; m[b] += $3 }
     END { for (b in n) printf "%6d s: loop %6.1f ms, memory %6.1f ms (%d samples)\n", b, l[b]/n[b], m[b]/n[b], n[b] }' \
  "$OUT/cpu_samples.txt" | sort -n
