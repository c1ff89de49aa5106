#!/usr/bin/env bash
# `make bench` on the device machine (H200), then optionally the GPU reliability tests.
# Usage: tools/device/run-bench.sh PARTS LIMIT_S [more bench args]; GPU_TESTS=1 also runs the GPU fault tests.
set -u
export PYTHONUNBUFFERED=1 TRITON_KERNELS_PATH="$PWD/.vendor/sgl-kernel-0.3.21" GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
parts=$1 limit=$2; shift 2
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$OUT/r/env.txt" 2>&1
t0=$(date +%s)
timeout "$limit" make bench REPORTS="$OUT/r" BENCH_ARGS="--parts $parts $*" > "$OUT/r/bench.log" 2>&1
echo "make bench REPORTS=\$OUT/r BENCH_ARGS=\"--parts $parts $*\" -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/r/bench.log"
grep "^\[bench" "$OUT/r/bench.log" | tail -30
if [ "${GPU_TESTS:-0}" = 1 ]; then
  t0=$(date +%s)
  timeout 240 .venv/bin/python -m pytest tests/test_fault_injection.py tests/gpu -k "gpu or cuda" -p no:cacheprovider -q -rs \
    > "$OUT/r/gpu-tests.log" 2>&1
  echo "gpu tests -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/r/gpu-tests.log"
  tail -15 "$OUT/r/gpu-tests.log"
fi
tar czf "$OUT/bench.tgz" -C "$OUT" r
