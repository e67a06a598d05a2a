#!/usr/bin/env bash
# The whole test suite on the GPU machine (`device`: one H200, 16 cores, Python 3.12,
# NVRTC 13.0, nvcc 13.0 in /usr/local/cuda): the README's test command, with what the
# image lacks brought in as wheels (prepare them here first: bash benchmarks/device/prepare.sh).
# Ray's wheel comes in two halves, by two commands within 30 s of each other (/tmp there
# survives that long):
#   1. carry .device/ray/part00:                   bash benchmarks/device/run_tests.sh fetch
#   2. carry .device/ray/part01 .device/wheels:     bash benchmarks/device/run_tests.sh
# Or in one command: carry .device/ray-site.tar.xz (Ray unpacked, what the tests do not
# use left out: 25 MB; prepare.sh makes it) with .device/wheels.
# Without Ray the Ray tests skip, as they do without Redis (not on that image).
# The last line of $OUT/pytest.txt is the summary line. Arguments go to pytest: the suite
# outgrew one command's 570 s there, so run it in two parts, each within 30 s of the last:
#   bash benchmarks/device/run_tests.sh tests/test_[a-m]*.py
#   bash benchmarks/device/run_tests.sh tests/test_[n-z]*.py tests/gpu asynccomp
set -uo pipefail
if [ "${1:-}" = fetch ]; then
  cp .device/ray/part00 /tmp/ray-part00 && ls -la /tmp/ray-part00
  exit
fi
. benchmarks/device/setup.sh
if [ -f .device/ray-site.tar.xz ] && [ ! -d "$SITE/ray" ]; then
  xz -dc .device/ray-site.tar.xz | tar -C "$SITE" -xf - || exit 1
fi
if [ -f .device/ray/part01 ] && [ -f /tmp/ray-part00 ] && [ ! -d "$SITE/ray" ]; then
  cat /tmp/ray-part00 .device/ray/part01 > /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
  python3 -m pip install -q --no-index --no-deps --target "$SITE" \
    /tmp/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl || exit 1
fi
export PATH="$SITE/bin:$PATH"
nvidia-smi -L
python3 -c "import sys, cuda.bindings; print(sys.version.split()[0], 'cuda-bindings', cuda.bindings.__version__)"
# -p no:benchmark: the image's pytest-benchmark has no benchmarks to run here, and warns
# at start-up under xdist (pyproject.toml ignores that warning too).
# -v: each test's outcome on a line of its own as it ends, so a run cut by the timeout
# still names its failures (the summary at the end never comes then). The whole log is
# $OUT/pytest.txt; what is printed here is every failure's line and the log's end.
log="${OUT:-/tmp}/pytest.txt"
status=0  # (setup.sh's `set -e` holds here: a failed run must not end the script unreported)
timeout "${SUITE_TIMEOUT:-540}" python3 -m pytest -p no:cacheprovider -p no:benchmark -v -rfE \
  --durations=15 "$@" > "$log" 2>&1 || status=$?
echo "pytest exit status: $status"
grep -E "FAILED|ERROR" "$log" | head -60 || true  # none: grep says 1
tail -40 "$log"
exit "$status"  # the command's status is pytest's, as it was through tee
