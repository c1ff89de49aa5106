#!/usr/bin/env bash
# Issue 43 on a GPU machine: `make test` (the harness's own suite) there, test by test, so that two commits' runs
# compare case by case (ci/gpu/suite_outcomes.py). Everything under $OUT: steps.txt, env.txt, test.log.gz,
# junit.xml.gz, outcomes.json. Carried: a wheelhouse for a machine with no package index (`WHEELS=`: the `test`
# extra's wheels for the device's python, `pip download`ed beside; the bootstrap's pip then takes from it only), and
# for another commit its `git archive` (`ARCHIVE=`).
#
#   WHEELS=dir     PIP_NO_INDEX=1 PIP_FIND_LINKS=dir for the bootstrap
#   ARCHIVE=f.tgz  run the suite of that tree (extracted to a fresh folder, its own .venv) instead of this checkout's
#   WORKERS=n      pytest-xdist workers (default 12), through `make test PYTEST_ARGS=...`
#   BASE=f.json    an earlier outcomes.json: compare.txt lists every test whose outcome differs
#   BUDGET=s       the whole call (default 560)
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/runenv.sh"
whole BUDGET 560 0 86400; whole WORKERS 12 1 1024
OUT=${OUT:-/tmp/out}; fresh_run_folder suite; mkdir -p "$OUT"     # removed when the call ends
BUDGET_S=$BUDGET; T_START=$(date +%s); LOGS="$R"
source "$HERE/steps.sh"
if [ -n "${WHEELS:-}" ]; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=$(cd "$WHEELS" && pwd); fi
TREE=$PWD
if [ -n "${ARCHIVE:-}" ]; then   # the other tree gets this checkout's .vendor/ (make upstream's output), if any
  TREE=$R/tree; mkdir -p "$TREE"; tar -xzf "$ARCHIVE" -C "$TREE"; [ -d .vendor ] && ln -s "$PWD/.vendor" "$TREE/.vendor"
fi
{ date -u; nvidia-smi -L; nproc; echo "tree $TREE"; python3 -c "import numpy, torch, triton; print('numpy', numpy.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
} > "$R/env.txt" 2>&1
cd "$TREE"
step make-test $(( BUDGET_S - 20 )) make test PYTEST_ARGS="-n $WORKERS -p no:cacheprovider -rfEs --junitxml=$R/junit.xml"
python3 "$HERE/suite_outcomes.py" outcomes "$R/junit.xml" > "$R/outcomes.json" 2>> "$R/steps.txt"
if [ -n "${BASE:-}" ]; then python3 "$HERE/suite_outcomes.py" compare "$BASE" "$R/outcomes.json" > "$R/compare.txt" 2>&1; head -40 "$R/compare.txt"; fi
tail -3 "$R/make-test.log"
gzip -c "$R/make-test.log" > "$OUT/test.log.gz"; gzip -c "$R/junit.xml" > "$OUT/junit.xml.gz" 2>/dev/null
cp "$R/steps.txt" "$R/env.txt" "$R/outcomes.json" "$OUT/" 2>/dev/null; [ -f "$R/compare.txt" ] && cp "$R/compare.txt" "$OUT/"
exit 0
