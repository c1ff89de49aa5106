# Sourced by the device scripts (ci/gpu/*_check.sh, scaling.sh): one timed step of a budgeted call.
# The caller sets LOGS (a folder: each step's log, and steps.txt), BUDGET_S (seconds for the whole call) and
# T_START ($(date +%s) at its start). Wall times come from `date +%s` (no bc on the device).
#   step NAME LIMIT COMMAND...   runs COMMAND for at most LIMIT s (less when the budget runs short; skipped, and
#                                said so, when 5 s or less are left), its output in $LOGS/NAME.log, one line per
#                                step in $LOGS/steps.txt, the log's last lines on stdout.
source "$(dirname "${BASH_SOURCE[0]}")/runenv.sh"
whole STEP_TAIL 3 0 100000
step() {
  local name=$1 limit=$2; shift 2
  if [[ ! $BUDGET_S =~ ^[0-9]+$ || ! $T_START =~ ^[0-9]+$ || ! $limit =~ ^-?[0-9]+$ ]]; then
    echo "steps.sh: BUDGET_S, T_START and a step's limit are whole numbers (whole, runenv.sh): refused" >&2; exit 2
  fi
  local t0=$(date +%s) left=$(( BUDGET_S - ($(date +%s) - T_START) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then echo "[$name] skipped: the ${BUDGET_S}-second budget is spent" | tee -a "$LOGS/steps.txt"; return; fi
  timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  echo "[$name] $* -> rc=$rc wall_s=$(( $(date +%s) - t0 ))" | tee -a "$LOGS/$name.log" "$LOGS/steps.txt"
  tail -n "$STEP_TAIL" "$LOGS/$name.log"
}
