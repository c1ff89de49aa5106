#!/usr/bin/env bash
# The lead's integrated check on the device machine, everything under $OUT (at most 8 files come back):
#   PART=matrix  `make sanitize`'s pytest command (default matrix, mode both, -n auto) with the image's python
#                (its numpy is outside the bootstrap pins and the machine has no index, so `make` would stop in
#                bootstrap); carried: .vendor/ (make upstream's output) and .devwhl/ (apache-tvm-ffi 0.1.11).
#   PART=final  `make sanitize` itself (now that bootstrap keeps the image's numpy), then PART=modes' steps.
#   PART=modes   the detection modes on the planted scenarios: guard_page and poison (planted_oob), uninit
#                (planted_uninit), racecheck (planted_race), synccheck (planted_barrier).
# Per case: outcome and findings in summary.txt; reports and worker logs in reports.tgz.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; R=/tmp/lead-r; mkdir -p "$OUT" "$R"
PART=${PART:-matrix}; T0=$(date +%s); BUDGET=${BUDGET:-540}
{ date -u; nvidia-smi -L; python3 -c "import numpy, torch, triton; print('numpy', numpy.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
  python3 -m pip install -q --no-index --no-deps .devwhl/*.whl; echo "tvm-ffi rc=$?"; } > "$R/env.txt" 2>&1
run() {  # run NAME LIMIT pytest-args...
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) )); [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 10 ]; then echo "[$name] not run: budget spent" | tee -a "$R/steps.txt"; return; fi
  local t0=$(date +%s)
  timeout "$limit" python3 -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadfile \
    --gpu-memsafety-report-dir "$R/$name" "$@" > "$R/$name.log" 2>&1
  echo "[$name] python3 -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadfile --gpu-memsafety-report-dir R/$name $* -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$R/steps.txt" "$R/$name.log"
}
if [ "$PART" = matrix ]; then
  run matrix 530 --gpu-memsafety-mode both ${ARGS:-}
elif [ "$PART" = final ]; then
  # `make sanitize` itself (bootstrap layered on the image's python, upstream --if-missing, the default matrix),
  # then the detection modes on the planted scenarios.
  t0=$(date +%s)
  timeout "${MATRIX_LIMIT:-330}" make sanitize REPORTS="$R/matrix" PYTEST_ARGS="${MATRIX_ARGS:-}" > "$R/matrix.log" 2>&1
  echo "[matrix] make sanitize REPORTS=R/matrix PYTEST_ARGS=\"${MATRIX_ARGS:-}\" -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$R/steps.txt" "$R/matrix.log"
  run guard_page 35 --gpu-memsafety-mode guard_page --gpu-memsafety-scenario planted_oob
  run poison 45 --gpu-memsafety-mode poison --gpu-memsafety-scenario planted_oob
  run uninit 35 --gpu-memsafety-mode uninit --gpu-memsafety-scenario planted_uninit
  run racecheck 50 --gpu-memsafety-mode racecheck --gpu-memsafety-scenario planted_race
  run synccheck 35 --gpu-memsafety-mode synccheck --gpu-memsafety-scenario planted_barrier
else
  run guard_page 60 --gpu-memsafety-mode guard_page --gpu-memsafety-scenario planted_oob
  run poison 80 --gpu-memsafety-mode poison --gpu-memsafety-scenario planted_oob
  run uninit 80 --gpu-memsafety-mode uninit --gpu-memsafety-scenario planted_uninit
  run racecheck 120 --gpu-memsafety-mode racecheck --gpu-memsafety-scenario planted_race
  run synccheck 80 --gpu-memsafety-mode synccheck --gpu-memsafety-scenario planted_barrier
fi
python3 - "$R" > "$R/summary.txt" 2>&1 <<'PY'
import json, sys
from collections import Counter
from pathlib import Path
for report in sorted(Path(sys.argv[1]).glob("*/report.json")):
    data = json.loads(report.read_text())
    cases = data.get("cases", [])
    print(f"== {report.parent.name}: {len(cases)} cases {dict(Counter(c['outcome'] for c in cases))}")
    for case in cases:
        print(f"  {case['id']}: {case['outcome']} {case['message'][:220]!r}")
        for f in case.get("findings", []):
            print(f"    {f['detector']} {f['kind']} {f['buffer']}/{f['region']} {f['bytes']} B x{f['count']} "
                  f"kernel={f['kernel'][:60]} ranges={[(r['start'], r['end']) for r in f['ranges']][:3]} note={f['note'][:160]!r}")
PY
cat "$R/steps.txt"; grep "^==" "$R/summary.txt"
cp "$R/summary.txt" "$R/steps.txt" "$R/env.txt" "$OUT/"
[ -f "$R/matrix.log" ] && tail -c 400000 "$R/matrix.log" > "$OUT/matrix.log"
tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
ls -la "$OUT"
