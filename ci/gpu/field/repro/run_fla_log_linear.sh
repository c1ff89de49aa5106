#!/usr/bin/env bash
# On a GPU machine, from the checkout's root, with .field/fla carried (ci/gpu/field/fetch.sh fla): the fla
# log-linear reproducer plainly and under memcheck, T = 15 (the bug) and T = 33 (the control); then fla's own
# log-linear tests under the bare flag (ci/gpu/field/campaign.sh, suite fla-loglinear). Everything under $OUT.
set -u
source "$(dirname "$0")/../../runenv.sh"
whole CAMPAIGN_BUDGET 330 0 86400
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; fresh_file "$OUT/steps.txt"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/.field/fla"
REPRO=ci/gpu/field/repro/fla_log_linear_short_sequence.py
{ date -u; nvidia-smi -L; compute-sanitizer --version | tail -1; git rev-parse HEAD; } > "$OUT/env.txt" 2>&1
t0=$(date +%s)
timeout 150 python3 $REPRO 15 > "$OUT/plain-15.txt" 2>&1; echo "plain T=15 rc=$? wall=$(( $(date +%s) - t0 ))" >> "$OUT/steps.txt"
for T in 15 33; do
  t0=$(date +%s)
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 150 compute-sanitizer --tool memcheck --print-limit 12 python3 $REPRO $T \
    > "$OUT/memcheck-$T.txt" 2>&1
  echo "memcheck T=$T rc=$? wall=$(( $(date +%s) - t0 )) errors: $(grep -c 'Invalid __global__ read' "$OUT/memcheck-$T.txt")" >> "$OUT/steps.txt"
done
unset PYTHONPATH
OUT="$OUT/campaign" SUITES="fla-loglinear" STEPS="plain complete" BUDGET=$CAMPAIGN_BUDGET STEP_MAX=200 \
  bash ci/gpu/field/campaign.sh > "$OUT/campaign.log" 2>&1
echo "campaign rc=$?" >> "$OUT/steps.txt"
