#!/usr/bin/env bash
# Detection without hints, measured on bugs the harness has never seen (issue 20): a held-out set of
# scenarios kept OUTSIDE the repository (carry it as an ignored folder, default .heldout/; each scenario watches
# only its output and expects nothing), run in every detector mode, then scored against the set's own
# truth.json by its score.py. Also planted_oob under memcheck and both (the calibration of the placement).
#   HELDOUT=.heldout MODES="both poison guard_page uninit" RUNS="name:--gpu-memsafety-mode X --extra ..." (optional, extra runs)
# Everything under $OUT: summary.txt (per case), score.md (the held-out table), steps.txt, env.txt, reports.tgz.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
source "$(dirname "$0")/runenv.sh"
whole BUDGET 560 0 86400; whole WORKERS 4 1 1024
OUT=${OUT:-/tmp/out}; fresh_run_folder heldout-r; mkdir -p "$OUT"
HELDOUT=${HELDOUT:-.heldout}; T0=$(date +%s)
{ date -u; nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  git log --oneline -1 2>/dev/null; ls "$HELDOUT"; } > "$R/env.txt" 2>&1
run() {  # run NAME LIMIT pytest-args...
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) )); [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 10 ]; then echo "[$name] not run: budget spent" | tee -a "$R/steps.txt"; return; fi
  local t0=$(date +%s)
  timeout "$limit" python3 -m pytest scenarios -p no:cacheprovider -rfEs -n "$WORKERS" --dist loadgroup \
    --gpu-memsafety-report-dir "$R/$name" "$@" > "$R/$name.log" 2>&1
  echo "[$name] python3 -m pytest scenarios -p no:cacheprovider -rfEs -n $WORKERS --dist loadgroup --gpu-memsafety-report-dir R/$name $* -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$R/steps.txt" "$R/$name.log"
}
for mode in ${MODES:-both poison guard_page uninit}; do
  run "heldout-$mode" 120 --gpu-memsafety-scenario-path "$HELDOUT" -m heldout --gpu-memsafety-mode "$mode"
done
if [ -n "${RUNS:-}" ]; then
  IFS=';' read -ra extra <<< "$RUNS"
  for spec in "${extra[@]}"; do run "${spec%%:*}" 150 ${spec#*:}; done
fi
for mode in ${PLANTED_MODES:-memcheck both}; do
  run "planted-$mode" 120 --gpu-memsafety-scenario planted_oob --gpu-memsafety-mode "$mode"
done
python3 ci/gpu/summarize.py "$R" > "$R/summary.txt" 2>&1
if [ -f "$HELDOUT/score.py" ]; then
  args=(); for d in "$R"/heldout-*/ "$R"/cover-*/; do [ -f "$d/report.json" ] && args+=("$(basename "$d")=$d/report.json"); done
  python3 "$HELDOUT/score.py" "$HELDOUT/truth.json" "${args[@]}" > "$R/score.md" 2>&1
fi
cat "$R/steps.txt"; grep "^==" "$R/summary.txt"; cat "$R/score.md" 2>/dev/null
cp "$R/summary.txt" "$R/steps.txt" "$R/env.txt" "$OUT/"; [ -f "$R/score.md" ] && cp "$R/score.md" "$OUT/"
tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
ls -la "$OUT"
