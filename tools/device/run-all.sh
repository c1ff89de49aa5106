#!/usr/bin/env bash
# One device call, in order of importance, each step under its own time limit, everything under $OUT:
# the GPU reliability tests, `make bench` (bandwidth, per-case modes, and the `make sanitize` matrix), then
# planted guard-page mode and a padded-stride repro. Wall times come from `date +%s` (no bc on the device).
set -u
export PYTHONUNBUFFERED=1 TRITON_KERNELS_PATH="$PWD/.vendor/sgl-kernel-0.3.21" GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
step() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$OUT/r/$name.log" 2>&1
  local rc=$?
  echo "[$name] $* -> rc=$rc wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/r/$name.log" "$OUT/r/steps.txt"
}
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$OUT/r/env.txt" 2>&1
step bootstrap 120 make .venv/.bootstrap-gpu
step gpu-tests 150 .venv/bin/python -m pytest tests/test_fault_injection.py tests/gpu -k "gpu or cuda or target" -p no:cacheprovider -q -rs
tail -4 "$OUT/r/gpu-tests.log"
step bench 420 make bench REPORTS="$OUT/r" BENCH_ARGS="--parts bandwidth,cases,matrix"
grep "^\[bench" "$OUT/r/bench.log" | tail -12
step planted-guard-page 60 .venv/bin/python -m pytest scenarios -p no:cacheprovider --gpu-memsafety-scenario planted_oob --gpu-memsafety-mode guard_page --gpu-memsafety-report-dir "$OUT/r/planted-guard-page" -q
tail -3 "$OUT/r/planted-guard-page.log"
step padded-repro 90 .venv/bin/python -m gpu_memsafety repro padded_stride_scale_write --variant packed --set impl=cuda --set hidden=2304 --mode all --keep "$OUT/r/padded-repro"
tail -25 "$OUT/r/padded-repro.log"
rm -rf "$OUT/r/bench/work/"*/batch-*/sanitizer.xml 2>/dev/null
tar czf "$OUT/all.tgz" -C "$OUT" r
