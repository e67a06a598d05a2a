#!/usr/bin/env bash
# Issue 36: which Python call starts the CUDA driver thread that keeps the tilelang and
# tvm-builder templates from forking on the GPU machine? Carry .device/wheels
# .device/tilelang-site.tar.xz (TileLang's site; TVM comes from .device/tvm.tar.xz where
# carried, else the tvm-builder step is skipped). About 60 s. For each template, its
# initializers step by step (template_threads.py), under thread_shim.c: every new thread
# prints the native and Python stacks that started it. Output in $OUT/threads_*.txt.
set -uo pipefail
export OUT
. benchmarks/device/setup.sh
gcc -shared -fPIC -O1 -o /tmp/thread_shim.so benchmarks/device/thread_shim.c -ldl || exit 1
TL=/tmp/site-tl
if [ ! -d "$TL/tilelang" ] && [ -f .device/tilelang-site.tar.xz ]; then
  mkdir -p "$TL" && xz -dc .device/tilelang-site.tar.xz | tar -C "$TL" -xf -
fi
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
# What decides whether a template answers torch's device count (_torch_devices.py).
{ ls /dev | grep -E "^nvidia[0-9]+$"; env | grep -E "^(CUDA_|PYTORCH_|NVIDIA_)" | sort; } \
  | tee "$OUT/threads_environment.txt"
for what in nvrtc gpu tilelang tilelang-answered tvm-builder tvm-builder-answered; do
  path="$PWD"
  case "$what" in
    tilelang*) [ -d "$TL/tilelang" ] || continue; path="$TL:$PWD" ;;
    tvm-builder*) [ -d "$SITE/tvm/lib" ] && [ -f "$SITE/tvm/lib/libtvm_compiler.so" ] || continue
                 path="$SITE:$PWD" ;;
  esac
  echo "== $what"
  PYTHONPATH="$path" LD_PRELOAD=/tmp/thread_shim.so timeout 120 \
    python3 benchmarks/device/template_threads.py "$what" > "$OUT/threads_$what.txt" 2>&1
  grep -v "^THREAD_SHIM\|^/\|^  \|^\[" "$OUT/threads_$what.txt" | tail -6
  # The Python stack of each thread started (the last frames name the call).
  awk '/THREAD_SHIM: Python stack/{p=1; n=0; next} /THREAD_SHIM: end/{p=0; print "--"} p{print}' \
    "$OUT/threads_$what.txt" | grep -v "importlib._bootstrap" | tail -40
done
