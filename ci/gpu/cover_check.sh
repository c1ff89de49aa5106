#!/usr/bin/env bash
# Issue 20 item 1, "every buffer covered by default", on the device machine (H200). Everything under $OUT, at most
# 8 files (summary.txt, compare.txt, steps.txt, env.txt, reports.tgz, matrix-logs.txt: the tail of each matrix log).
#
#   PART=matrix   (default) the whole default matrix as `make sanitize` runs it (mode both, PYTEST_ARGS "-n 4", as
#                 results/h200/run12-make-sanitize-final.md), once per cover in COVERS (default "all watched":
#                 every buffer covered, then only watch=True buffers, the behaviour before issue 20), each timed;
#                 compare.txt lists every case whose outcome differs between the two, and each run's counts.
#   PART=planted  scenarios/planted_unwatched.py (Triton and CUDA; only the output is watched) in modes both,
#                 memcheck, guard, poison and guard_page with every buffer covered, then memcheck with
#                 --gpu-memsafety-cover watched (the old blind spot: the overread must be missed there).
#   PART=all      planted, then matrix (one device call holds at most 600 s: with cold caches run PART=matrix and
#                 PART=planted as two calls; BUDGET caps every step so that the summary is always written).
# Carried (see ci/gpu/README.md): .vendor/ (make upstream's output) and .devwhl/ (apache-tvm-ffi 0.1.11).
#
# What it should show: matrix: cover=all and cover=watched differ only in planted_unwatched's input_overread cases
# (all: expected finding, memcheck overread of x; watched: unexpectedly clean, "x was not covered"; its
# input_overwrite stays an expected finding either way, by memcheck under all and by scratch's back guard under
# watched), no case failing under cover=all that passes under watched; the wall time of each (the first run pays
# the cold caches: its time is an upper bound). planted: both/memcheck: input_overread -> memcheck overread of x
# past_end 4 B (16384..16388 for n4096, 16000..16004 for n4000); input_overwrite -> memcheck overwrite of scratch
# past_end 4 B (64..68); clean -> clean. guard: the overwrite seen by the markers (scratch past_end 64..68, zone
# back_guard), the overread not applicable. poison: the overread found by poison (x past_end, 4 B), the overwrite
# by the markers. guard_page: n4096 overread -> a fault naming x among the buffers on guard pages; n4000 overread
# not applicable (x's alignment tail); the overwrite seen by the markers in scratch's alignment tail. memcheck
# --gpu-memsafety-cover watched: both bugs unexpectedly clean ("... was not covered ..."), clean stays clean.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
source "$(dirname "$0")/runenv.sh"
whole BUDGET 580 0 86400
OUT=${OUT:-/tmp/out}; fresh_run_folder cover-r; mkdir -p "$OUT"
PART=${PART:-matrix}; COVERS=${COVERS:-all watched}; BUDGET_S=$BUDGET; T_START=$(date +%s); LOGS="$R"
MATRIX_ARGS=${MATRIX_ARGS:--n 4}
source "$(dirname "$0")/steps.sh"
{ date -u; nvidia-smi -L; python3 -c "import numpy, torch, triton; print('numpy', numpy.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
  if ls .devwhl/*.whl > /dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps .devwhl/*.whl; echo "tvm-ffi rc=$?"; fi
} > "$R/env.txt" 2>&1
planted() {  # planted NAME LIMIT pytest-args...
  local name=$1 limit=$2; shift 2
  step "$name" "$limit" python3 -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadgroup \
    --gpu-memsafety-scenario planted_unwatched --gpu-memsafety-report-dir "$R/$name" "$@"
}
if [ "$PART" = planted ] || [ "$PART" = all ]; then
  planted planted-both 120 --gpu-memsafety-mode both
  planted planted-memcheck 60 --gpu-memsafety-mode memcheck
  planted planted-guard 40 --gpu-memsafety-mode guard
  planted planted-poison 60 --gpu-memsafety-mode poison
  planted planted-guard_page 60 --gpu-memsafety-mode guard_page
  planted planted-memcheck-watched 60 --gpu-memsafety-mode memcheck --gpu-memsafety-cover watched
fi
if [ "$PART" = matrix ] || [ "$PART" = all ]; then
  # A cover named twice runs twice (matrix-all, then matrix-all-2): COVERS="all watched all" times cover=all again
  # on warm caches, which the comparison then uses (the last run of each cover).
  for cover in $COVERS; do
    name="matrix-$cover"; k=1
    while [ -e "$R/$name" ]; do k=$((k + 1)); name="matrix-$cover-$k"; done
    step "$name" 560 make sanitize REPORTS="$R/$name" PYTEST_ARGS="$MATRIX_ARGS --gpu-memsafety-cover $cover"
  done
fi
python3 ci/gpu/summarize.py "$R" > "$R/summary.txt" 2>&1
python3 - "$R" > "$R/compare.txt" 2>&1 <<'PY'
import json, sys
from collections import Counter
from pathlib import Path
root = Path(sys.argv[1])
runs = {}
for cover in ("all", "watched"):
    done = sorted((p for p in root.glob(f"matrix-{cover}*/report.json")
                   if p.parent.name == f"matrix-{cover}" or p.parent.name.startswith(f"matrix-{cover}-")),
                  key=lambda p: int(p.parent.name.rsplit("-", 1)[1]) if p.parent.name.count("-") > 1 else 1)
    name = f"matrix-{cover}"
    if done:
        runs[name] = {c["id"]: c for c in json.loads(done[-1].read_text()).get("cases", [])}
        print(f"{name}: {len(runs[name])} cases {dict(Counter(c['outcome'] for c in runs[name].values()))} "
              f"(from {done[-1].parent.name}, the last run of this cover)")
    else:
        print(f"{name}: no report.json (did not run or did not finish)")
if len(runs) == 2:
    a, w = runs["matrix-all"], runs["matrix-watched"]
    ids = sorted(set(a) | set(w))
    diff = [i for i in ids if (a.get(i) or {}).get("outcome") != (w.get(i) or {}).get("outcome")]
    print(f"\n{len(diff)} of {len(ids)} cases differ (cover=all vs cover=watched):")
    for i in diff:
        ca, cw = a.get(i) or {}, w.get(i) or {}
        print(f"  {i}: all={ca.get('outcome')} watched={cw.get('outcome')}")
        print(f"      all: {ca.get('message', '')[:300]!r}")
        print(f"      watched: {cw.get('message', '')[:300]!r}")
    new = [i for i in ids if (a.get(i) or {}).get("outcome") in ("finding", "unexpectedly clean")]
    print(f"\nfailing under cover=all: {len(new)}: {new}")
    for name, cases in runs.items():
        covered = Counter(len(c.get("details", {}).get("cover", {}).get("covered", [])) for c in cases.values())
        print(f"{name}: cases by number of covered buffers {dict(sorted(covered.items()))}")
# What each matrix run cost (every run, in order; the wall times are in steps.txt): the cases' own seconds.
for path in sorted(root.glob("matrix-*/report.json"), key=lambda p: p.stat().st_mtime):
    secs = sorted(float(c.get("duration_s", 0)) for c in json.loads(path.read_text()).get("cases", []))
    if secs:
        print(f"{path.parent.name}: {len(secs)} cases, case seconds summed {sum(secs):.1f}, median {secs[len(secs) // 2]:.3f}")
PY
cat "$R/steps.txt"; grep "^==" "$R/summary.txt"; cat "$R/compare.txt"
cp "$R/summary.txt" "$R/compare.txt" "$R/steps.txt" "$R/env.txt" "$OUT/"
for log in "$R"/matrix-*.log; do [ -f "$log" ] && tail -c 40000 "$log" >> "$OUT/matrix-logs.txt"; done
tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
ls -la "$OUT"
