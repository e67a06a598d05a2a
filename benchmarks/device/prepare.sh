#!/usr/bin/env bash
# Run HERE (not on the GPU machine): fetch the cp312 wheels the GPU machine's image lacks
# into the git-ignored .device/ folder that its commands carry:
#   .device/wheels/   apache-tvm-ffi, platformdirs, pytest-asyncio (asynccomp and its tests),
#                     jsonschema and what it needs (Ray 2.60 imports it; the image lacks it)
#   .device/ray/      Ray's wheel in two halves, part00 and part01 (79 MB: over one
#                     command's 64 MiB carry; see run_tests.sh and run_ray.sh)
# Idempotent: what is there already is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$1" "${@:2}"
}
mkdir -p .device/wheels .device/ray
download .device/wheels 'apache-tvm-ffi==0.1.14.post0' platformdirs pytest-asyncio \
  jsonschema jsonschema-specifications referencing rpds-py
if [ ! -f .device/ray/part01 ]; then
  tmp="$(mktemp -d)"
  download "$tmp" 'ray==2.60.0'
  split -n 2 -d "$tmp"/ray-*.whl .device/ray/part
  rm -r "$tmp"
fi
ls -la .device/wheels .device/ray
