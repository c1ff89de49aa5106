#!/usr/bin/env bash
# Issue 52 on a GPU: the re-layout changes no outcome. `make sanitize` with no arguments (mode complete) and the two
# suite calibrations run in two trees, and every case of each is compared (ci/gpu/summarize.py, durations left out):
#   old  the tree before the re-layout: a `git archive` of it carried as an ignored folder (OLD, default .old)
#   new  this checkout
# SIDES="old new" (the default) runs both, in the order old sanitize, new sanitize, then each calibration old/new,
# while the budget lasts (BUDGET s, each step under its own limit: steps.sh). SIDES=new with BASE_DIR=FOLDER (a
# carried, unpacked old-reports.tgz of an earlier call) compares this checkout against that earlier old run.
# Carried: .vendor/ (make upstream's output; the old tree links to it), .devwhl/ (apache-tvm-ffi 0.1.11 cp312),
# OLD. Under $OUT: summary.txt (each side's cases and findings, then the diff), steps.txt, env.txt,
# old-reports.tgz and new-reports.tgz (report.json of each run).
#   suitecalib  ci/gpu/field/calib/test_widths.py under `--gpu-memsafety` (9 planted widths and a clean twin)
#   hostcalib   ci/gpu/hostsuite/calib/test_calib.py under `--gpu-memsafety=memcheck` (a copy outside the tree)
# What it should show: the diff section empty ("0 lines differ") for each run both sides reached.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
source "$(dirname "$0")/runenv.sh"
whole BUDGET 560 0 86400
OUT=${OUT:-/tmp/out}; fresh_run_folder relayout-r; mkdir -p "$OUT"
REPO=$PWD; OLD=${OLD:-.old}; SIDES=${SIDES:-old new}; BUDGET_S=$BUDGET; T_START=$(date +%s); LOGS="$R"
source "$(dirname "$0")/steps.sh"
case " $SIDES " in *" old "*) [ -f "$OLD/Makefile" ] || { echo "no old tree at $OLD (carry it)"; exit 2; } ;; esac
{ date -u; nvidia-smi -L; nproc
  python3 -c "import numpy, torch, triton; print('numpy', numpy.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
  if ls .devwhl/*.whl > /dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps .devwhl/*.whl; echo "tvm-ffi rc=$?"; fi
  git rev-parse HEAD 2>/dev/null || echo "new: no git"; echo "sides: $SIDES"
} > "$R/env.txt" 2>&1
tree() { if [ "$1" = old ]; then echo "$REPO/$OLD"; else echo "$REPO"; fi; }
[ -e "$OLD/.vendor" ] || { [ -d "$OLD" ] && ln -s "$REPO/.vendor" "$OLD/.vendor"; }

for s in $SIDES; do ( cd "$(tree "$s")" && step "$s-bootstrap" 200 make .venv/.bootstrap-gpu ); done
for s in $SIDES; do ( cd "$(tree "$s")" && step "$s-sanitize" 260 make sanitize REPORTS="$R/$s/sanitize" ); done
for s in $SIDES; do
  ( cd "$(tree "$s")/ci/gpu/field/calib" && step "$s-suitecalib" 90 "$(tree "$s")/.venv/bin/python" -m pytest \
      -p no:cacheprovider -q --gpu-memsafety test_widths.py --gpu-memsafety-report-dir "$R/$s/suitecalib" )
done
for s in $SIDES; do
  rm -rf "$R/hc-$s"; cp -r "$(tree "$s")/ci/gpu/hostsuite/calib" "$R/hc-$s"
  ( cd "$R/hc-$s" && step "$s-hostcalib" 120 "$(tree "$s")/.venv/bin/python" -m pytest -p no:cacheprovider -q \
      --gpu-memsafety=memcheck test_calib.py --gpu-memsafety-batch 8 --gpu-memsafety-timeout 100 \
      --gpu-memsafety-report-dir "$R/$s/hostcalib" )
done

[ -n "${BASE_DIR:-}" ] && [ -d "$BASE_DIR" ] && { rm -rf "$R/old"; cp -r "$BASE_DIR" "$R/old"; echo "old side from $BASE_DIR" >> "$R/env.txt"; }
{ for s in old new; do
    [ -d "$R/$s" ] || continue
    echo "######## $s"; python3 ci/gpu/summarize.py "$R/$s" | sed -E 's/\([0-9.]+ s\)//' > "$R/$s.txt"; cat "$R/$s.txt"
  done
  echo "######## diff old new"
  if [ -f "$R/old.txt" ] && [ -f "$R/new.txt" ]; then
    diff "$R/old.txt" "$R/new.txt"; echo "$(diff "$R/old.txt" "$R/new.txt" | grep -c '^[<>]') lines differ"
  else echo "not compared: a side is missing"; fi
} > "$OUT/summary.txt" 2>&1
cp "$R/steps.txt" "$R/env.txt" "$OUT/" 2>/dev/null
for s in old new; do
  [ -d "$R/$s" ] && tar czf "$OUT/$s-reports.tgz" -C "$R/$s" $(cd "$R/$s" && find . -name report.json) 2>/dev/null
done
tail -3 "$OUT/summary.txt"
