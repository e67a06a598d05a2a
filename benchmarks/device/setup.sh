#!/usr/bin/env bash
# Prepare the GPU machine (prepare.sh, run here, fills .device/): the wheels it lacks and TVM
# into /tmp/site, from the git-ignored .device/ folder the run carries:
#   .device/wheels/        apache-tvm-ffi 0.1.14.post0, platformdirs, pytest-asyncio (cp312)
#   .device/tvm/           TVM 0.27's Python package without lib/libtvm_compiler.so
#                          (or .device/tvm.tar.xz, the same xz'd; .device/corpus.tar.xz too)
#   .device/tvmlib/part1   the first half of `xz -9 libtvm_compiler.so` (split -n 2)
#   .device/tvmlib/part2   the second half, carried by a second command within 30 s
# Idempotent: a command started within 30 s of the last one finds /tmp as it was left.
# Source it: `. benchmarks/device/setup.sh`; it exports PYTHONPATH.
set -euo pipefail
export SITE=/tmp/site
mkdir -p "$SITE"
if [ ! -d "$SITE/tvm_ffi" ]; then
  python3 -m pip install -q --no-index --no-deps --target "$SITE" .device/wheels/*.whl
fi
if [ ! -d "$SITE/tvm" ] && [ -d .device/tvm ]; then
  cp -r .device/tvm "$SITE/tvm"
fi
# The same xz'd (2.7 MB instead of 17), and the corpus (0.2 MB instead of 5.8): room in one
# command's 64 MiB for the Ray archive and the library's first half beside them.
if [ ! -d "$SITE/tvm" ] && [ -f .device/tvm.tar.xz ]; then
  xz -dc .device/tvm.tar.xz | tar -C "$SITE" -xf -
fi
if [ ! -d .device/corpus ] && [ -f .device/corpus.tar.xz ]; then
  xz -dc .device/corpus.tar.xz | tar -C .device -xf -
fi
if [ -f .device/tvmlib/part1 ]; then
  cp .device/tvmlib/part1 /tmp/tvm-part1
fi
if [ -f .device/tvmlib/part2 ] && [ ! -f "$SITE/tvm/lib/libtvm_compiler.so" ]; then
  cat /tmp/tvm-part1 .device/tvmlib/part2 | xz -d > "$SITE/tvm/lib/libtvm_compiler.so"
fi
export PYTHONPATH="$SITE:$PWD"
export CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
set +euo pipefail
