#!/usr/bin/env bash
# Issue 24's code-structure part on the device machine (H200), one call under 8 minutes, everything under $OUT:
# the modules split by job do on a GPU what they did before the split. Carries nothing (`.vendor` optional:
# without it the smoke cases that need upstream code are unsupported, accepted here with --gpu-memsafety-allow-unsupported).
#   1. bench (the gpu_memsafety.cli.bench package: parent parts, the measuring child started as
#      `python -m gpu_memsafety.cli.bench child JOB.json`, timing, targets, bench.md) on one planted case:
#      parts bandwidth and cases, with guard_page and memcheck timed in their own children.
#      Expect: bench.json with every part "ok"-status rows, bench.md with the targets table, no part "error".
#   2. the smoke matrix under mode both with xdist (fixtures/config, controller, failure_text, scenario_run):
#      Expect: exit 0, every planted case its expected outcome (summary.txt), the batch line, reports written.
#   3. tests/gpu (the GPU tests: guard pages, detectors, pre-dispatch CUDA).
# Case by case against the matrix from before: `PART=matrix BASE=<a report.json from before> tools/device/package_check.sh`.
set -u -o pipefail
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; R=/tmp/refactor-r; mkdir -p "$OUT" "$R"
BUDGET_S=${BUDGET_S:-470}; T_START=$(date +%s)
LOGS="$R"
source "$(dirname "$0")/steps.sh"
PY=.venv/bin/python
step bootstrap 120 make .venv/.bootstrap-gpu       # the editable install into .venv, as a fresh clone gets it
{ date -u; nvidia-smi -L; $PY -c "import gpu_memsafety, sys; print('gpu_memsafety from', gpu_memsafety.__file__, sys.version)"
  $PY -m gpu_memsafety env; } > "$R/env.txt" 2>&1
CASE='planted_oob[clean-triton-n4000-x1]'   # clean: guard_page and memcheck are timed too (an expected finding stops them)
step bench 150 $PY -m gpu_memsafety bench --out "$R/bench" --parts bandwidth,cases --case "$CASE" \
  --reps 5 --sizes-mib 64,256 --case-modes guard_page,memcheck
$PY - "$R/bench/bench.json" >> "$R/summary.txt" 2>&1 <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
for name, part in doc["parts"].items():
    print(f"bench part {name}: status={part.get('status', 'ok')} seconds={part.get('part_seconds', 0):.1f}")
for row in doc["parts"].get("cases", {}).get("cases", []):
    print(f"  {row['case_id']}: {row.get('status')} bare={row.get('bare', {}).get('median_ms')} ms "
          f"guard_page={row.get('guard_page', {}).get('status', 'timed')} memcheck={row.get('memcheck', {}).get('status', 'timed')}")
for t in doc["targets"]:
    print(f"  target {t['status']}: {t['target'][:70]}")
EOF
step smoke 170 $PY -m pytest scenarios -p no:cacheprovider -rfEs -m smoke -n auto --dist loadgroup --gpu-memsafety-mode both \
  --gpu-memsafety-allow-unsupported --gpu-memsafety-report-dir "$R/smoke"
step gpu-tests 150 $PY -m pytest tests/gpu -p no:cacheprovider -q -rA
python3 tools/device/summarize.py "$R" >> "$R/summary.txt" 2>&1
cat "$R/summary.txt" | head -60
tar czhf "$OUT/refactor.tgz" -C /tmp refactor-r
cp "$R/summary.txt" "$R/steps.txt" "$OUT/" 2>/dev/null
echo "total wall_s=$(( $(date +%s) - T_START ))"
