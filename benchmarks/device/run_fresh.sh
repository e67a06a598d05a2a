#!/usr/bin/env bash
# A FRESH GPU machine's first command (carry .device/wheels .device/corpus): where the first
# batch's time goes there. First how long the files NVRTC reads take to read the first
# time (CUDA's headers, NVRTC's libraries), then benchmarks/compile/first_batch.py (three
# fresh processes): after the reads, its first trial shows what is left of the first
# batch's cost once the files are in the page cache. Then the suite (run_tests.sh's
# arguments after --): SUITE=0 leaves it out.
. benchmarks/device/setup.sh
nvidia-smi -L | tee "$OUT/gpu.txt"
uptime | tee -a "$OUT/gpu.txt"
python3 - <<'PY' 2>&1 | tee "$OUT/cold_reads.txt"
import glob, os, time
def read_all(label, paths):
    started, size = time.perf_counter(), 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    size += len(chunk)
        except OSError:
            pass
    print(f"{label}: {size / 2**20:.0f} MiB in {time.perf_counter() - started:.2f} s", flush=True)
roots = ["/usr/local/cuda/include", "/usr/local/cuda/targets/x86_64-linux/include"]
headers = sorted({os.path.realpath(p) for r in roots for p in glob.glob(r + "/**/*", recursive=True) if os.path.isfile(p)})
libs = sorted({os.path.realpath(p) for p in glob.glob("/usr/local/cuda/lib64/libnvrtc*") + glob.glob("/usr/local/lib/python3*/*-packages/nvidia/*/lib/libnvrtc*")})
read_all("NVRTC's libraries", libs)
read_all(f"CUDA's headers ({len(headers)} files)", headers)
PY
timeout 120 python3 -m benchmarks.compile.first_batch --corpus .device/corpus --workers 16 \
  --trials 2 --json "$OUT/first_batch16_after_reads.json" 2>&1 | tee "$OUT/first_batch16_after_reads.txt"
if [ "${SUITE:-1}" = 1 ]; then
  SUITE_TIMEOUT="${SUITE_TIMEOUT:-420}" bash benchmarks/device/run_tests.sh "$@"
fi
