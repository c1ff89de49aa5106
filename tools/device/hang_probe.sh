#!/usr/bin/env bash
# Why `make sanitize MODE=both` hung on sampling_threshold_overread[buggy-fi0.7.1-rows3-samples4] (session 8, call 1:
# the batch ran > 250 s and was killed; in mode complete the same case takes 0.4-2 s). One case at a time through
# `gpu-memsafety repro --keep` in modes both, complete, memcheck, guard, and both with CUDA_LAUNCH_BLOCKING=1, each
# under `timeout`; a sampler writes the process tree and GPU utilisation every 10 s (ps.txt). Everything under $OUT
# as probe.tgz plus steps.txt. Then, while BUDGET lasts, `make sanitize MODE=m` for m in MODES (complete_check's
# runs.txt, in modes.tgz).
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; R=/tmp/hang-r; mkdir -p "$OUT" "$R"
BUDGET_S=${BUDGET:-560}; T_START=$(date +%s); LOGS="$R"
source "$(dirname "$0")/steps.sh"
if ls .devwhl/*.whl > /dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps .devwhl/*.whl; fi
step bootstrap 150 make .venv/.bootstrap-gpu
step upstream 120 .venv/bin/python -m gpu_memsafety upstream --if-missing
( while true; do { echo "== $(date +%T)"; nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
    ps -eo pid,ppid,stat,etimes,pcpu,args --forest | grep -E 'python|compute-sanitizer|nvcc|cicc|ptxas' | grep -v grep | cut -c1-220
  } >> "$R/ps.txt" 2>&1; sleep 10; done ) &
SAMPLER=$!
CASE='sampling_threshold_overread[buggy-fi0.7.1-rows3-samples4]'
probe() {  # probe NAME LIMIT MODE [env...]
  local name=$1 limit=$2 mode=$3; shift 3
  echo "== $(date +%T) start $name" >> "$R/ps.txt"
  step "$name" "$limit" env "$@" .venv/bin/python -m gpu_memsafety repro "$CASE" --mode "$mode" --keep "$R/$name" --json "$R/$name.json"
}
probe complete 150 complete X=1      # first: builds the kernel (nvcc, ~30 s) on a fresh machine
probe both 120 both X=1
probe memcheck 90 memcheck X=1
probe both-blocking 90 both CUDA_LAUNCH_BLOCKING=1
probe guard 60 guard X=1
kill $SAMPLER 2>/dev/null
tar czf "$OUT/probe.tgz" -C "$R" . 2>/dev/null
cp "$R/steps.txt" "$OUT/probe-steps.txt"
left=$(( BUDGET_S - ($(date +%s) - T_START) ))
if [ -n "${MODES:-}" ] && [ "$left" -gt 120 ]; then
  OUT="$OUT/modes" STEPS="$(for m in $MODES; do printf 'mode-%s ' "$m"; done)" PART=seq BUDGET=$left NEED=${NEED:-100} \
    bash "$(dirname "$0")/complete_check.sh" > "$R/modes.log" 2>&1
  tar czf "$OUT/modes.tgz" -C "$OUT/modes" . 2>/dev/null; rm -rf "$OUT/modes"
fi
cat "$R/steps.txt"; ls -la "$OUT"
