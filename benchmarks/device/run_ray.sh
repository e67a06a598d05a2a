#!/usr/bin/env bash
# The Ray executor on the GPU machine (16 cores): benchmarks/compile/ray_executor.py over the
# corpus, and the Ray tests. Ray's cp312 wheel (79 MB) is over one command's carry
# (64 MiB), so it comes in two halves (`split -n 2 -d WHEEL .device/ray/part`), by two
# commands within 30 s of each other (/tmp survives that long):
#   1. carry .device/ray/part00:                               bash benchmarks/device/run_ray.sh fetch
#   2. carry .device/ray/part01 .device/wheels .device/corpus:  bash benchmarks/device/run_ray.sh run
# Ray's dependencies are on the machine's image but jsonschema, which it imports only
# for runtime environments; the wheel goes in with --no-deps.
set -uo pipefail
if [ "${1:-}" = fetch ]; then
  cp .device/ray/part00 /tmp/ray-part00 && ls -la /tmp/ray-part00
  exit
fi
. benchmarks/device/setup.sh
if [ ! -d "$SITE/ray" ]; then
  cat /tmp/ray-part00 .device/ray/part01 > /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --target "$SITE" \
    /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl || exit 1
fi
export PATH="$SITE/bin:$PATH"
timeout 240 python3 -m benchmarks.compile.ray_executor --corpus .device/corpus --rounds 3 \
  --json "$OUT/ray_executor.json" 2>&1 | grep -v "Token authentication" | tee "$OUT/ray_executor.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_ray.py 2>&1 | tail -8 | tee "$OUT/pytest_ray.txt"
