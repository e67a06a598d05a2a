#!/usr/bin/env bash
# Run HERE (not on the GPU machine), after prepare.sh: TVM 0.27 for the GPU machine's
# commands, from a venv with apache-tvm==0.27.0.post1 (default /work/tvm-venv; TVM_VENV=...):
#   .device/tvm/           TVM's Python package without lib/libtvm_compiler.so (~17 MB)
#   .device/tvm.tar.xz     the same, xz'd (~2.7 MB)
#   .device/tvmlib/part1   the first half of `xz -9 libtvm_compiler.so` (~30 MB)
#   .device/tvmlib/part2   the second half (setup.sh joins them there)
# Idempotent: what is there already is kept.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="${TVM_VENV:-/work/tvm-venv}"
tvm="$("$venv/bin/python" -c 'import os, tvm; print(os.path.dirname(tvm.__file__))')"
if [ ! -d .device/tvm ]; then
  mkdir -p .device
  cp -r "$tvm" .device/tvm
  rm -rf .device/tvm/lib/libtvm_compiler.so .device/tvm/3rdparty .device/tvm/src \
    .device/tvm/include .device/tvm/lib64
  find .device/tvm -name __pycache__ -prune -exec rm -rf {} +
fi
if [ ! -f .device/tvm.tar.xz ]; then
  tar -C .device -cf - tvm | xz -9 -T2 > .device/tvm.tar.xz
fi
if [ ! -f .device/tvmlib/part2 ]; then
  mkdir -p .device/tvmlib
  xz -9 -T2 -c "$tvm/lib/libtvm_compiler.so" > /tmp/libtvm_compiler.so.xz
  split -n 2 -d /tmp/libtvm_compiler.so.xz /tmp/tvmlib-part
  mv /tmp/tvmlib-part00 .device/tvmlib/part1
  mv /tmp/tvmlib-part01 .device/tvmlib/part2
  rm /tmp/libtvm_compiler.so.xz
fi
# The corpus the GPU machine's benchmarks read: CORPUS=<folder of .cu files>, made with
# python -m benchmarks.corpus.make_corpus --out <folder> (TVM's venv).
if [ -n "${CORPUS:-}" ]; then
  mkdir -p .device/corpus && cp "$CORPUS"/*.cu .device/corpus/
fi
if [ -d .device/corpus ] && [ ! -f .device/corpus.tar.xz ]; then
  tar -C .device -cf - corpus | xz -9 > .device/corpus.tar.xz
fi
du -sh .device/tvm .device/tvmlib/*
