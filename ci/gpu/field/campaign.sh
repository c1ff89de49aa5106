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
#   trace      --gpu-memsafety=trace (Triton's interpreter: no GPU needed)
#   explore    --gpu-memsafety --gpu-memsafety-explore $EXPLORE_ARGS (each test also at its boundary shapes; budgets:
#              EXPLORE_ARGS="--gpu-memsafety-explore-variants N --gpu-memsafety-explore-seconds S ...")
# INTERPRET=1: a run without a GPU: every step runs Triton's interpreter (TRITON_INTERPRET=1), the bare flag runs the
#   trace (what `complete` runs without a GPU), no GPU bootstrap (SKIP_BOOTSTRAP is implied). Suites whose tests pick
#   the device themselves (`cpu` where there is no GPU) run; those that hard-code "cuda" fail plainly and say so.
# Caches: Triton's kernel cache (TRITON_CACHE_DIR) and its autotune results (TRITON_CACHE_AUTOTUNING=1) live in
# /tmp/field-cache; CACHE_IN=FILE restores them from an earlier call's CACHE_OUT=FILE (carried), so a second call
# starts warm. BUDGET (s) bounds the whole call: steps run in order until it is spent (each capped at STEP_MAX s).
# Under $OUT: summary.txt (one line per step: suite, step, rc, wall s, pytest's counts, verdict counts, findings),
# steps.txt, env.txt, reports.tgz (each guarded step's report folder and every step's log).
set -u
set -o pipefail
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
REPO=$PWD; OUT=${OUT:-/tmp/out}
source "$REPO/ci/gpu/runenv.sh"
whole BUDGET 540 0 86400; whole STEP_MAX 240 1 86400
fresh_run_folder field-runs; LOGS=$R/logs     # this call's own: a warm machine's earlier call never shows in it
mkdir -p "$OUT" "$LOGS"; fresh_file "$OUT/summary.txt"; rm -f "$OUT"/*.part-*
BUDGET_S=$BUDGET; T_START=$(date +%s)
SUITES=${SUITES:-"calib ao"}; STEPS=${STEPS:-"plain plain markers complete"}
PY="$REPO/.venv/bin/python"
export TRITON_CACHE_DIR=/tmp/field-cache/triton TRITON_CACHE_AUTOTUNING=1
export GPU_MEMSAFETY_CACHE=/tmp/field-cache/gms
mkdir -p "$TRITON_CACHE_DIR"
# CACHE_IN=DIR: the parts (*.part-*) of an earlier call's CACHE_OUT, carried in DIR
if [ -n "${CACHE_IN:-}" ] && ls "$CACHE_IN"/*.part-* > /dev/null 2>&1; then
  cat "$CACHE_IN"/*.part-* | { if command -v xz > /dev/null; then xz -dc 2>/dev/null || true; fi; } > "$R/cache.tar"; [ -s "$R/cache.tar" ] || cat "$CACHE_IN"/*.part-* | gzip -dc > "$R/cache.tar"; tar -xf "$R/cache.tar" -C /tmp/field-cache && echo "cache restored: $(du -sh /tmp/field-cache)"; rm -f "$R/cache.tar"
fi

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
if [ -n "${INTERPRET:-}" ]; then export TRITON_INTERPRET=1; SKIP_BOOTSTRAP=1; fi
[ -n "${SKIP_BOOTSTRAP:-}" ] || step bootstrap 150 make .venv/.bootstrap-gpu
source "$REPO/ci/gpu/field/suites.sh"

for entry in $SUITES; do       # NAME, or NAME:STEP,STEP,... for steps of its own
  suite=${entry%%:*}; own=""; [ "$entry" != "$suite" ] && own=${entry#*:}
  suite_def "$suite" || { echo "unknown suite $suite" >> "$LOGS/steps.txt"; continue; }
  n=0
  list=$STEPS; [ -n "$own" ] && list=${own//,/ }
  for what in $list; do
    n=$((n + 1)); name="$suite-$n-$what"
    case $what in
      plain) flags=() ;;
      markers) flags=(--gpu-memsafety=markers --gpu-memsafety-report-dir "$R/$name") ;;
      complete) flags=(--gpu-memsafety --gpu-memsafety-report-dir "$R/$name") ;;
      explore) flags=(--gpu-memsafety --gpu-memsafety-explore ${EXPLORE_ARGS:-} --gpu-memsafety-report-dir "$R/$name") ;;
      memcheck) flags=(--gpu-memsafety=memcheck --gpu-memsafety-report-dir "$R/$name") ;;
      trace) flags=(--gpu-memsafety=trace --gpu-memsafety-report-dir "$R/$name") ;;
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

# REPROS="ao:ci/gpu/field/repro/ao_4634_gemm_scales.py ...": each standalone reproducer (SUITE:SCRIPT, run with that
# suite's PYTHONPATH and environment) plain, then under plain compute-sanitizer memcheck with the caching allocator
# off; its memcheck error lines (deduplicated) go to summary.txt.
for spec in ${REPROS:-}; do
  suite=${spec%%:*}; script=$REPO/${spec#*:}; name="repro-$(basename "$script" .py)"
  suite_def "$suite" || continue
  step "$name-plain" 120 env "${SUITE_ENV[@]}" PYTHONPATH="$SUITE_PATH" "$PY" "$script"
  step "$name-memcheck" 180 env "${SUITE_ENV[@]}" PYTHONPATH="$SUITE_PATH" PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    compute-sanitizer --tool memcheck --print-limit 0 "$PY" "$script"
  { echo "$name: plain: $(grep -v '^\[' "$LOGS/$name-plain.log" | tail -2 | tr '\n' ' ')"
    echo "$name: memcheck: $(grep -c 'Invalid __global__' "$LOGS/$name-memcheck.log") invalid-access records; ERROR SUMMARY: $(grep -o 'ERROR SUMMARY: [0-9]* error' "$LOGS/$name-memcheck.log")"
    grep -A3 'Invalid __global__' "$LOGS/$name-memcheck.log" | grep -E 'Invalid|at |Access|bytes (after|before)' | sed 's/^=* *//' \
      | sed -E 's/0x[0-9a-f]+/ADDR/g; s/thread \([0-9,]+\)/thread T/; s/block \([0-9,]+\)/block B/' | sort | uniq -c | sort -rn | head -12
  } >> "$OUT/summary.txt" 2>&1
done

cp "$LOGS/steps.txt" "$LOGS/env.txt" "$OUT/" 2>/dev/null
tar -czf "$OUT/reports.tgz" -C "$R" . 2>/dev/null
if [ -n "${CACHE_OUT:-}" ]; then     # Triton's cache (kernels and autotune choices), in parts of 15 MiB at most
  Z=xz; command -v xz > /dev/null || Z=gzip; echo "cache compressor: $Z" >> "$OUT/summary.txt"
  tar -cf - -C /tmp/field-cache . 2>/dev/null | $Z -6 | split -b 15m - "$OUT/$CACHE_OUT.part-"
  ls -la "$OUT"/"$CACHE_OUT".part-* | tee -a "$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
