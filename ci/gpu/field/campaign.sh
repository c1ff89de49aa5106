#!/usr/bin/env bash
# The field campaign (issue 41) in one device call: `pytest --gpu-memsafety` over real kernel libraries' own test
# suites, each run plain (cold, then warm) and guarded, with wall times, on one GPU. Run from the checkout's root:
#
#   OUT=/tmp/out SUITES="calib ao mamba" STEPS="plain plain markers complete" BUDGET=540 bash ci/gpu/field/campaign.sh
#
# SUITES: names from ci/gpu/field/suites.sh (what each runs, from where, and why). STEPS: for each suite, in order:
#   plain      the suite's own run, no plugin options (a first plain run compiles and autotunes: cold)
#   markers    --gpu-memsafety=markers
#   complete   --gpu-memsafety (no mode: the complete set)
#   memcheck   --gpu-memsafety=memcheck
# Caches: Triton's kernel cache (TRITON_CACHE_DIR) and its autotune results (TRITON_CACHE_AUTOTUNING=1) live in
# /tmp/field-cache; CACHE_IN=FILE restores them from an earlier call's CACHE_OUT=FILE (carried), so a second call
# starts warm. BUDGET (s) bounds the whole call: steps run in order until it is spent (each capped at STEP_MAX s).
# Under $OUT: summary.txt (one line per step: suite, step, rc, wall s, pytest's counts, verdict counts, findings),
# steps.txt, env.txt, reports.tgz (each guarded step's report folder and every step's log).
set -u
set -o pipefail
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
REPO=$PWD; OUT=${OUT:-/tmp/out}; R=/tmp/field-runs; LOGS=$R/logs
mkdir -p "$OUT" "$R" "$LOGS"
BUDGET_S=${BUDGET:-540}; T_START=$(date +%s); STEP_MAX=${STEP_MAX:-240}
SUITES=${SUITES:-"calib ao"}; STEPS=${STEPS:-"plain plain markers complete"}
PY="$REPO/.venv/bin/python"
export TRITON_CACHE_DIR=/tmp/field-cache/triton TRITON_CACHE_AUTOTUNING=1
export GPU_MEMSAFETY_CACHE="$REPO/.cache/build"
mkdir -p "$TRITON_CACHE_DIR"
if [ -n "${CACHE_IN:-}" ] && [ -f "$CACHE_IN" ]; then tar -xzf "$CACHE_IN" -C /tmp/field-cache; fi

step() {    # step NAME LIMIT COMMAND...: at most LIMIT s (less when the budget runs short), logged, timed
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) left=$(( BUDGET_S - ($(date +%s) - T_START) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then echo "[$name] skipped: the ${BUDGET_S}-second budget is spent" | tee -a "$LOGS/steps.txt"; return 124; fi
  timeout -k 10 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo "[$name] rc=$rc wall_s=$(( $(date +%s) - t0 )) limit_s=$limit" | tee -a "$LOGS/$name.log" "$LOGS/steps.txt"
  return $rc
}

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  which compute-sanitizer; compute-sanitizer --version | tail -1; git -C "$REPO" rev-parse HEAD 2>/dev/null
  du -sh /tmp/field-cache 2>/dev/null; } > "$LOGS/env.txt" 2>&1
step bootstrap 150 make .venv/.bootstrap-gpu
source "$REPO/ci/gpu/field/suites.sh"

for suite in $SUITES; do
  suite_def "$suite" || { echo "unknown suite $suite" >> "$LOGS/steps.txt"; continue; }
  n=0
  for what in $STEPS; do
    n=$((n + 1)); name="$suite-$n-$what"
    case $what in
      plain) flags=() ;;
      markers) flags=(--gpu-memsafety=markers --gpu-memsafety-report-dir "$R/$name") ;;
      complete) flags=(--gpu-memsafety --gpu-memsafety-report-dir "$R/$name") ;;
      memcheck) flags=(--gpu-memsafety=memcheck --gpu-memsafety-report-dir "$R/$name") ;;
      *) echo "unknown step $what" >> "$LOGS/steps.txt"; continue ;;
    esac
    # SUITE_DIR, SUITE_PATH (PYTHONPATH), SUITE_ARGS (array) and SUITE_ENV (array of K=V) come from suite_def
    step "$name" "$STEP_MAX" env "${SUITE_ENV[@]}" PYTHONPATH="$SUITE_PATH${PYTHONPATH:+:$PYTHONPATH}" \
      bash -c 'cd "$0" && exec "$@"' "$SUITE_DIR" "$PY" -m pytest -p no:cacheprovider -q -rfEs \
      "${SUITE_ARGS[@]}" "${flags[@]}"
    rc=$?
    "$PY" "$REPO/ci/gpu/field/summarize.py" "$suite" "$what" "$rc" "$LOGS/$name.log" "$R/$name" >> "$OUT/summary.txt" 2>&1
  done
done

cp "$LOGS/steps.txt" "$LOGS/env.txt" "$OUT/" 2>/dev/null
tar -czf "$OUT/reports.tgz" -C "$R" . 2>/dev/null
if [ -n "${CACHE_OUT:-}" ]; then
  tar -czf "$OUT/$CACHE_OUT" -C /tmp/field-cache . 2>/dev/null
  ls -la "$OUT/$CACHE_OUT"
fi
cat "$OUT/summary.txt"
