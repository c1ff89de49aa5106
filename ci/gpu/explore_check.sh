#!/usr/bin/env bash
# Issue 50 on a GPU: explore (`pytest --gpu-memsafety --gpu-memsafety-explore`) under the complete set (children:
# the markers pass, then memcheck), over its calibration ci/gpu/field/calib_explore (eight bugs that trigger only at
# unlisted shapes, each with a clean twin). One call, about 6 minutes:
#   plain     the calibration without the harness: every test passes (the bugs are silent at the listed shapes)
#   listed    --gpu-memsafety (complete) without explore: every listed case clean (nothing is found without explore)
#   explore   --gpu-memsafety --gpu-memsafety-explore: each variant a case, rebuilt from its id in the children;
#             check.py --reads-at-least judges it: every bug found (writes at their exact bytes, the markers';
#             reads from their first byte, memcheck's), no finding on any twin, the listed cases clean.
# What to look at: $OUT/check.txt (OK, or one MISMATCH line each), $OUT/steps.txt (rc and wall time of each step:
# the cost of explore against the listed run), $OUT/explore.json (variants run, not run, outcomes), reports.tgz.
set -u
set -o pipefail
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
REPO=$PWD; source "$REPO/ci/gpu/runenv.sh"
whole BUDGET 530 0 86400
OUT=${OUT:-/tmp/out}; fresh_run_folder explore-r; mkdir -p "$OUT"
BUDGET_S=$BUDGET; T_START=$(date +%s); LOGS="$R"
export GPU_MEMSAFETY_CACHE="$REPO/.cache/build"
source "$(dirname "$0")/steps.sh"
PY="$REPO/.venv/bin/python"; CAL="$REPO/ci/gpu/field/calib_explore"
{ date -u; nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  which compute-sanitizer; } > "$R/env.txt" 2>&1
step bootstrap 150 make .venv/.bootstrap-gpu
printf '#!/usr/bin/env bash\ncd "%s" && exec %s -m pytest -p no:cacheprovider -q -rfEs "$@"\n' "$CAL" "$PY" > /tmp/exrun.sh
chmod +x /tmp/exrun.sh
step plain 90 /tmp/exrun.sh -p no:gpu_memsafety
step listed 120 /tmp/exrun.sh --gpu-memsafety --gpu-memsafety-report-dir "$R/listed"
step explore 400 /tmp/exrun.sh --gpu-memsafety --gpu-memsafety-explore --gpu-memsafety-report-dir "$R/explore"
"$PY" "$CAL/check.py" "$R/explore/report.json" --reads-at-least > "$OUT/check.txt" 2>&1
"$PY" - "$R/listed/report.json" >> "$OUT/check.txt" 2>&1 <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
bad = [(c["id"], c["outcome"]) for c in doc["cases"] if c["outcome"] != "clean"]
print(f"listed run: {len(doc['cases'])} cases, not clean: {bad or 'none'}")
PYEOF
cp "$R/explore/explore.json" "$OUT/" 2>/dev/null
cp "$R/steps.txt" "$R/env.txt" "$OUT/"
tar -czf "$OUT/reports.tgz" -C "$R" . 2>/dev/null
cat "$OUT/check.txt" "$OUT/steps.txt"
