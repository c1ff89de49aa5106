#!/usr/bin/env bash
# One batch of GPU work for the device machine (H200): environment, then the given pytest runs, every
# harness report and worker log packed under $OUT. Usage: tools/device/probe.sh NAME "PYTEST ARGS" [...]
set -u
export PYTHONUNBUFFERED=1 TRITON_KERNELS_PATH="$PWD/.vendor/sgl-kernel-0.3.21" GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$OUT/r/env.txt" 2>&1
cat "$OUT/r/env.txt"
while [ $# -ge 2 ]; do
  name=$1; args=$2; shift 2
  echo "=== $name: python3 -m pytest $args"
  start=$(date +%s)
  python3 -m pytest $args --gpu-memsafety-report-dir "$OUT/r/$name" > "$OUT/r/$name.log" 2>&1
  rc=$?
  end=$(date +%s)
  echo "rc=$rc wall_s=$(( end - start ))" | tee -a "$OUT/r/$name.log"
  grep -E "passed|failed|error" "$OUT/r/$name.log" | tail -2
done
tar czf "$OUT/runs.tgz" .cache/runs 2>/dev/null
tar czf "$OUT/reports.tgz" -C "$OUT" r
