#!/usr/bin/env bash
# Run HERE (not on the GPU machine): fetch the cp312 wheels the GPU machine's image lacks
# into the git-ignored .device/ folder that its commands carry:
#   .device/wheels/   apache-tvm-ffi, platformdirs, pytest-asyncio, pytest-xdist, trio and what it
#                     needs (asynccomp and its tests: the suite runs on asyncio and trio),
#                     cloudpickle (asynccomp.triton's tests of kernels sent by value),
#                     jsonschema and what it needs (Ray 2.60 imports it; the image lacks it)
#   .device/ray/      Ray's wheel in two halves, part00 and part01 (79 MB: over one
#                     command's 64 MiB carry; see run_tests.sh and run_ray.sh)
#   .device/ray-site.tar.xz
#                     Ray unpacked as installed, without what asynccomp and its tests do
#                     not use (Java's jars, RLlib, Tune, Train, Serve, Data, LLM), xz'd:
#                     25 MB, so run_tests.sh takes Ray in the same command as the suite
#   .device/tilelang/ TileLang 0.1.15 and the cp312 wheels it needs that the image lacks:
#                     a/ the first halves of TileLang's and z3's wheels (over the carry
#                     together), b/ their second halves and the small wheels
#                     (run_tilelang.sh joins them)
#   .device/tilelang-site.tar.xz
#                     the same wheels unpacked as installed (xz -9: 45 MB, one command's
#                     carry), so run_tilelang.sh needs one command, not two
# Idempotent: what is there already is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
download() {
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$1" "${@:2}"
}
mkdir -p .device/wheels .device/ray
download .device/wheels 'apache-tvm-ffi==0.1.14.post0' platformdirs pytest-asyncio pytest-xdist execnet \
  cloudpickle jsonschema jsonschema-specifications referencing rpds-py \
  trio outcome sniffio sortedcontainers attrs idna
if [ ! -f .device/ray/part01 ]; then
  tmp="$(mktemp -d)"
  download "$tmp" 'ray==2.60.0'
  split -n 2 -d "$tmp"/ray-*.whl .device/ray/part
  rm -r "$tmp"
fi
if [ ! -f .device/tilelang/b/complete ]; then
  tmp="$(mktemp -d)"
  download "$tmp" 'tilelang==0.1.15' 'apache-tvm-ffi==0.1.12' 'torch-c-dlpack-ext==0.1.5' \
    'z3-solver==4.15.4.0' platformdirs pytest-asyncio
  rm -rf .device/tilelang && mkdir -p .device/tilelang/a .device/tilelang/b
  for wheel in "$tmp"/tilelang-*.whl "$tmp"/z3_solver-*.whl; do
    name="$(basename "$wheel")"
    split -n 2 -d "$wheel" "$tmp/$name.part"
    mv "$tmp/$name.part00" .device/tilelang/a/
    mv "$tmp/$name.part01" .device/tilelang/b/
    rm "$wheel"
  done
  mv "$tmp"/*.whl .device/tilelang/b/
  touch .device/tilelang/b/complete
  rm -r "$tmp"
fi
if [ ! -f .device/ray-site.tar.xz ]; then
  tmp="$(mktemp -d)"
  cat .device/ray/part00 .device/ray/part01 > "$tmp/ray.whl"
  unzip -q "$tmp/ray.whl" -d "$tmp/site"
  for unused in jars rllib llm tune train serve data; do rm -rf "$tmp/site/ray/$unused"; done
  # The `ray` command pip would write (tests start heads with `ray start --head`).
  mkdir "$tmp/site/bin"
  printf '#!/usr/bin/env python3\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n' \
    > "$tmp/site/bin/ray"
  chmod +x "$tmp/site/bin/ray"
  tar -C "$tmp/site" -cf - . | xz -9 -T2 > .device/ray-site.tar.xz
  rm -r "$tmp"
fi
if [ ! -f .device/tilelang-site.tar.xz ]; then
  tmp="$(mktemp -d)"
  for half in .device/tilelang/b/*.part01; do
    name="$(basename "$half" .part01)"
    cat ".device/tilelang/a/$name.part00" "$half" > "$tmp/$name"
  done
  mkdir "$tmp/site" "$tmp/site/bin"
  for wheel in "$tmp"/*.whl .device/tilelang/b/*.whl; do unzip -q -o "$wheel" -d "$tmp/site"; done
  # What pip would put in bin/ (z3's executable), and no .data folders left.
  for data in "$tmp"/site/*.data; do
    if [ -d "$data/data/bin" ]; then mv "$data"/data/bin/* "$tmp/site/bin/"; fi
    rm -r "$data"
  done
  tar -C "$tmp/site" -cf - . | xz -9 -T2 > .device/tilelang-site.tar.xz
  rm -r "$tmp"
fi
ls -la .device/ray-site.tar.xz .device/tilelang-site.tar.xz .device/wheels .device/ray .device/tilelang/a .device/tilelang/b
