#!/usr/bin/env bash
# Campaign 2 (issue 50): confirm on one GPU what the CPU campaign found, in one device call (<= 540 s), from the
# checkout's root, with .field/ carried (ci/gpu/field/fetch.sh; no download is needed or possible there):
#
#   OUT=/tmp/out bash ci/gpu/field/campaign2_confirm.sh
#
# For each reproducer of ci/gpu/field/repro/ named in REPROS (LIB:FILE[:ARGS[:initcheck]], LIB's tree on
# PYTHONPATH; ARGS comma-separated):
#   plain      the reproducer's own run on the GPU (its exit status and its own check where it has one)
#   memcheck   plain compute-sanitizer --tool memcheck, the caching allocator off (every tensor its own allocation)
#   initcheck  (only where the entry says so: LIB:FILE:ARGS:initcheck) compute-sanitizer --tool initcheck
# then, for each SUITES entry, the library's test under the bare flag (ci/gpu/field/campaign.sh, STEPS="complete").
# Everything under $OUT: steps.txt (one line per step: name, rc, wall s, error counts), one log per step, env.txt.
set -u
REPO=$PWD; OUT=${OUT:-/tmp/out}
source "$REPO/ci/gpu/runenv.sh"
whole BUDGET 540 0 86400                 # read safely, before anything runs (ci/gpu/runenv.sh)
mkdir -p "$OUT"; fresh_file "$OUT/steps.txt"
PY="$REPO/.venv/bin/python"; [ -x "$PY" ] || PY=python3
T0=$(date +%s)
export PYTHONUNBUFFERED=1
{ date -u; nvidia-smi -L; compute-sanitizer --version | tail -1; git -C "$REPO" rev-parse HEAD
  "$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$OUT/env.txt" 2>&1

left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
step() {   # step NAME LIMIT CMD...: bounded by LIMIT and by what is left of the budget
  local name=$1 limit=$2; shift 2
  local l; l=$(left); [ "$l" -lt "$limit" ] && limit=$l
  if [ "$limit" -le 10 ]; then echo "$name skipped: budget spent" >> "$OUT/steps.txt"; return; fi
  local t=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc wall_s=$(( $(date +%s) - t )) invalid=$(grep -c 'Invalid __global__' "$OUT/$name.log") uninit=$(grep -c 'Uninitialized __global__' "$OUT/$name.log") $(grep -o 'ERROR SUMMARY: [0-9]* error' "$OUT/$name.log" | tail -1)" >> "$OUT/steps.txt"
}

path_of() {   # the PYTHONPATH a library's reproducer runs with
  case $1 in
    fla|liger|mamba|ao) echo "$REPO/.field/$1" ;;
    liger-src) echo "$REPO/.field/liger/src" ;;
    sglang) echo "$REPO/.field/sglang:$REPO/ci/gpu/field/cpu" ;;
    triton_kernels) echo "$REPO/.field/triton_kernels" ;;
    *) echo "$REPO/.field/$1" ;;
  esac
}

# The findings' reproducers (LIB:FILE:ARGS[:initcheck]), each bug before its control; fla's log-linear overread
# (confirmed on the H200, run 51) last, as the known-positive control of the whole call
REPROS=${REPROS:-"mamba:mamba_varlen_empty_first_sequence.py mamba:mamba_varlen_empty_first_sequence.py:5,0,70
  mamba:mamba3_varlen_empty_last_sequence.py mamba:mamba3_varlen_empty_last_sequence.py:0,3
  triton_kernels:triton_kernels_topk_backward_rows.py:40,33:initcheck
  triton_kernels:triton_kernels_topk_backward_rows.py:40,40:initcheck fla:fla_log_linear_short_sequence.py:15"}
for spec in $REPROS; do
  IFS=: read -r lib file args tool <<< "$spec"
  name="$(basename "$file" .py)${args:+-${args//,/-}}"; args=${args//,/ }
  pp=$(path_of "$lib")
  step "$name-plain" 90 env PYTHONPATH="$pp" "$PY" "$REPO/ci/gpu/field/repro/$file" $args
  step "$name-memcheck" 120 env PYTHONPATH="$pp" PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    compute-sanitizer --tool memcheck --print-limit 20 "$PY" "$REPO/ci/gpu/field/repro/$file" $args
  if [ "${tool:-}" = initcheck ]; then
    step "$name-initcheck" 120 env PYTHONPATH="$pp" PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
      compute-sanitizer --tool initcheck --print-limit 20 "$PY" "$REPO/ci/gpu/field/repro/$file" $args
  fi
done

# The libraries' tests under the bare flag (suites of ci/gpu/field/suites.sh), with what is left
SUITES=${SUITES-"mamba-varlen fla-loglinear-15"}
if [ -n "$SUITES" ] && [ "$(left)" -gt 60 ]; then
  OUT="$OUT/campaign" SUITES="$SUITES" STEPS="complete" BUDGET=$(( $(left) - 10 )) STEP_MAX=200 \
    bash "$REPO/ci/gpu/field/campaign.sh" > "$OUT/campaign.log" 2>&1
  echo "campaign rc=$?" >> "$OUT/steps.txt"
fi
cat "$OUT/steps.txt"
