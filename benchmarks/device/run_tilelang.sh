#!/usr/bin/env bash
# asynccomp.tilelang on the GPU machine (Python 3.12, torch 2.11, no TileLang): the
# TileLang tests, then benchmarks/tuners/tilelang_sweep.py (the 64-config compile phase in
# TileLang's own modes and asynccomp's, each in a fresh process, from_kernel and the
# decorator; then SASS checks and every kernel run against torch).
# TileLang 0.1.15 and its cp312 wheels come from the git-ignored .device/tilelang/
# (made from `pip download --only-binary=:all: --python-version 3.12`): TileLang's
# wheel (49.6 MB) and z3's (29.3 MB) are split in halves (`split -n 2 -d`), a/ holding
# the first halves and b/ the second with the small wheels (apache-tvm-ffi 0.1.12,
# torch-c-dlpack-ext, tqdm, typing-extensions, platformdirs, pytest-asyncio), carried by
# two commands started within 30 s of each other (/tmp survives that long):
#   1. carry .device/tilelang/a:   bash benchmarks/device/run_tilelang.sh fetch
#   2. carry .device/tilelang/b:   bash benchmarks/device/run_tilelang.sh run [sweep args]
# or by one command that carries .device/tilelang-site.tar.xz (the same, unpacked as
# installed and xz'd: 45 MB; prepare.sh makes it):   bash benchmarks/device/run_tilelang.sh run
# Everything goes in with --no-deps into /tmp/site-tl, so the machine's torch stays.
set -uo pipefail
if [ "${1:-}" = fetch ]; then
  cp .device/tilelang/a/*.part00 /tmp/ && ls -la /tmp/*.part00
  exit
fi
shift || true
SITE=/tmp/site-tl
if [ ! -d "$SITE/tilelang" ] && [ -f .device/tilelang-site.tar.xz ]; then
  mkdir -p "$SITE" && xz -dc .device/tilelang-site.tar.xz | tar -C "$SITE" -xf - || exit 1
fi
if [ ! -d "$SITE/tilelang" ]; then
  mkdir -p "$SITE" /tmp/tl-wheels
  for half in .device/tilelang/b/*.part01; do
    name="$(basename "$half" .part01)"
    cat "/tmp/$name.part00" "$half" > "/tmp/tl-wheels/$name" || exit 1
  done
  cp .device/tilelang/b/*.whl /tmp/tl-wheels/
  python3 -m pip install -q --no-index --no-deps --target "$SITE" /tmp/tl-wheels/*.whl || exit 1
fi
# TileLang reads CUDA_HOME (a wrapper script on PATH can mislead its own search);
# cuobjdump (the SASS checks) comes from the toolkit's bin/.
export CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export PYTHONPATH="$SITE:$PWD" PATH="$SITE/bin:$PATH:$CUDA_PATH/bin"
nvidia-smi -L | tee "$OUT/gpu.txt"
python3 -c "import tilelang, torch, cuda.bindings; print(tilelang.__version__, torch.__version__, \
cuda.bindings.__version__, torch.cuda.is_available())" 2>&1 | tee -a "$OUT/gpu.txt"
# SKIP_TESTS=1: the sweep only (the tests are in the whole suite's run too); =after: the
# tests after the FIRST block (which then finds the machine fresh). TESTS: which (the
# default: the TileLang tests and NVRTC's PCH).
run_tests() {
  # trio and its dependencies for the tests' trio variants (TileLang's site has none),
  # from .device/wheels where the command carries it, last on the path: nothing of
  # TileLang's (its apache-tvm-ffi) is replaced.
  local extra=/tmp/site-trio
  if [ ! -d "$extra/trio" ] && ls .device/wheels/trio-*.whl > /dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --target "$extra" \
      .device/wheels/{trio,outcome,sortedcontainers,attrs,idna,sniffio}-*.whl || true
  fi
  # shellcheck disable=SC2086 # TESTS is a list of arguments
  PYTHONPATH="$PYTHONPATH:$extra" timeout "${TESTS_TIMEOUT:-150}" python3 -m pytest -q -p no:cacheprovider -rfE \
    ${TESTS:-tests/test_tilelang.py tests/test_nvrtc_pch.py} 2>&1 | tail -40 \
    | tee "$OUT/pytest_tilelang.txt"
}
if [ "${SKIP_TESTS:-0}" = 0 ]; then
  run_tests
fi
# Issue 27: each mode in a fresh process (a mode's first autotune then pays what a user's
# first one pays: TileLang's imports in the lowering workers, the engine's start), through
# AutoTuner.from_kernel and through the @tilelang.autotune decorator, 64 configs, 2 passes;
# then one run holding TileLang's and asynccomp's nvcc kernels together, for the SASS and
# bitwise checks on the GPU. ENTRIES, MODES and CHECKS=0 narrow it.
# FIRST=1: first, benchmarks/tuners/first_autotune.py: three tuning processes in a row
# from nothing warm (the server and shared templates stopped), sharing on (issue 36).
# FIRST_VARIANTS: which runs, in order (each from nothing warm; default "late"):
#   late            register() just before the autotune (TileLang imported long before)
#   early           register() as each process starts, before its `import tilelang`
#   decorator-early the decorator's first autotune, registered early, one process (no
#                   baseline: TileLang's own decorator takes 140 s on an H100)
#   early-nopch     "early" with no precompiled header (register(pch=False)): what the
#                   machine's first process pays for making one PCH in every worker, in
#                   an autotune where each worker compiles once
#   early-one       "early" with one process: the machine's first, against the baseline
#                   (for a machine with little device time left)
#   early-again     after "early": one process, the server stopped first (as one stops
#                   after 5 idle minutes); the next server makes the PCH of the last
#                   one's hints as it starts (ASYNCCOMP_PCH_AHEAD), before the autotune
if [ "${FIRST:-0}" = 1 ]; then
  for variant in ${FIRST_VARIANTS:-late}; do
    case "$variant" in
      late) first=(--processes 3 --baseline tilelang-grouped); sweep=(--entry from_kernel) ;;
      early) first=(--processes 3 --baseline tilelang-grouped)
        sweep=(--entry from_kernel --register-early) ;;
      early-one) first=(--processes 1 --baseline tilelang-grouped)
        sweep=(--entry from_kernel --register-early) ;;
      decorator-early) first=(--processes 1); sweep=(--entry decorator --register-early) ;;
      early-nopch) first=(--processes 3 --baseline tilelang-grouped)
        sweep=(--entry from_kernel --register-early) ;;
      early-again) first=(--processes 1); sweep=(--entry from_kernel --register-early) ;;
      *) echo "unknown FIRST_VARIANTS entry: $variant"; exit 2 ;;
    esac
    mode=asynccomp-nvrtc-grouped; [ "$variant" = early-nopch ] && mode=asynccomp-nvrtc-nopch-grouped
    name=first_autotune; [ "$variant" = late ] || name="first_autotune_$variant"
    timeout "${FIRST_TIMEOUT:-240}" python3 -m benchmarks.tuners.first_autotune "${first[@]}" \
      --out "$OUT/$name" -- --no-gpu --passes 2 "${sweep[@]}" \
      --modes "$mode" --server "$@" 2>&1 \
      | grep -v -e "configurations:" -e "Tuned Latency" -e "^\s*$" -e "Compiling configurations" \
      | tee "$OUT/$name.txt"
  done
fi
if [ "${SKIP_TESTS:-0}" = after ]; then
  run_tests
fi
ENTRIES="${ENTRIES:-from_kernel decorator}"
MODES="${MODES:-tilelang tilelang-grouped asynccomp-nvcc asynccomp-nvcc-grouped asynccomp-nvrtc asynccomp-nvrtc-grouped}"
for entry in $ENTRIES; do
  for mode in $MODES; do
    echo "== $entry $mode (load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$OUT/tilelang_sweep.txt"
    timeout "${SWEEP_TIMEOUT:-300}" python3 -m benchmarks.tuners.tilelang_sweep --entry "$entry" --modes "$mode" \
      --no-gpu --json "$OUT/sweep_${entry}_${mode}.json" "$@" 2>&1 \
      | grep -v -e "configurations:" -e "Tuned Latency" -e "^\s*$" | tee -a "$OUT/tilelang_sweep.txt"
  done
done
if [ "${CHECKS:-1}" = 1 ]; then
  timeout "${SWEEP_TIMEOUT:-300}" python3 -m benchmarks.tuners.tilelang_sweep --passes 1 \
    --modes tilelang,asynccomp-nvcc,tilelang-grouped,asynccomp-nvcc-grouped,asynccomp-nvrtc \
    --json "$OUT/tilelang_checks.json" "$@" 2>&1 \
    | grep -v -e "configurations:" -e "Tuned Latency" -e "^\s*$" | tee "$OUT/tilelang_checks.txt"
fi
# At most 8 files come back from $OUT: the rest go into one archive.
bash benchmarks/device/pack_out.sh > /dev/null
