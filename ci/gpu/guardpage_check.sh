#!/usr/bin/env bash
# Issue 20 items 1 and 4, guard-page part, on the device machine (H200). Everything under $OUT, 4 files
# (summary.txt, steps.txt, reports.tgz, pages-runs.tgz). Carried like ci/gpu/cover_check.sh: .vendor/ (make
# upstream's output) and .devwhl/ (apache-tvm-ffi 0.1.11), for the matrix's upstream cases.
#   PART=planted  (about 3-4 minutes)
#     1. planted_pages in guard_page mode (Triton and CUDA; only `out` is watched, every buffer covered): every buffer
#        sits on a page, the fault has three candidates (a|b|out) and the reruns name the one buffer and its side:
#        read_past_end -> guard_page overread of b/past_end, named=yes, reruns "a back page: ok", "b back page: fault",
#        "out back page: ok", "b front page: ok"; read_before_start -> guard_page overread of a/before_start (the
#        front-page pass faulted: side front; "a front page: fault", "b front page: ok", "out front page: ok", "a back
#        page: ok"); both fixed twins clean, passes guard_page then guard_page_front; tests/gpu/test_pages.py passes
#        (the real VMM pages where the layout says, and the same naming through the runner);
#     2. planted_oob in guard_page mode: overread n=4096 -> src/past_end named (no more "src|dst"); overwrite n=4000
#        extra=200 -> dst/past_end named; planted_unwatched in guard_page mode (cover's calibration) for comparison.
#   PART=matrix   (two runs of the default matrix; one call fits with warm caches)
#     3. the whole default matrix in guard_page mode with every buffer covered (--gpu-memsafety-cover all) and only watched ones
#        (--gpu-memsafety-cover watched), `make sanitize MODE=guard_page PYTEST_ARGS="-n 4 --gpu-memsafety-cover ..."`, each timed: the same
#        expected findings, no new failure, and the wall-time cost of covering every buffer plus the second pass and
#        the reruns (summary.txt: each step's wall_s, outcome counts, every case that reran with its reruns and times,
#        the cases whose outcome differs between the two).
#   PART=all      planted, then matrix (BUDGET caps it: the matrix steps that do not fit say "not run").
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
source "$(dirname "$0")/runenv.sh"
whole BUDGET 570 0 86400
OUT=${OUT:-/tmp/out}; fresh_run_folder guardpage-r; mkdir -p "$OUT"
T_START=$(date +%s)
LOGS=$R; source "$(dirname "$0")/steps.sh"
PART=${PART:-all}; BUDGET_S=$BUDGET
{ date -u; nvidia-smi -L; python3 -m gpu_memsafety env; git log -1 --format='%H %s' 2>/dev/null
  if ls .devwhl/*.whl > /dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps .devwhl/*.whl; echo "tvm-ffi rc=$?"; fi
} > "$R/env.txt" 2>&1
if [ "$PART" = planted ] || [ "$PART" = all ]; then
  step build 120 python3 -c "import torch; from gpu_memsafety.kernels.planted import pages, cuda; cc = torch.cuda.get_device_capability(); pages._cuda_module(cc); print(cuda.build(cc))"
  step pages 120 python3 -m pytest scenarios -p no:cacheprovider -q -rA --gpu-memsafety-mode guard_page --gpu-memsafety-scenario planted_pages \
    --gpu-memsafety-report-dir "$R/pages"
  step gpu-test 90 python3 -m pytest tests/gpu/test_pages.py -p no:cacheprovider -q -rA
  step oob-reach 40 python3 -m gpu_memsafety repro planted_oob --variant overread --set impl=triton --set n=4096 --set extra=1 \
    --mode guard_page --json "$R/oob-reach.json"
  step oob-cross 40 python3 -m gpu_memsafety repro planted_oob --variant overwrite --set impl=triton --set n=4000 --set extra=200 \
    --mode guard_page --json "$R/oob-cross.json"
  step unwatched 90 python3 -m pytest scenarios -p no:cacheprovider -q -rA --gpu-memsafety-mode guard_page --gpu-memsafety-scenario planted_unwatched \
    --gpu-memsafety-report-dir "$R/unwatched"
fi
if [ "$PART" = matrix ] || [ "$PART" = all ]; then
  for cover in all watched; do
    step "matrix-$cover" 280 make sanitize MODE=guard_page REPORTS="$R/matrix-$cover" PYTEST_ARGS="-n 4 --gpu-memsafety-cover $cover"
  done
fi
python3 - "$R" > "$R/summary.txt" 2>&1 <<'PY'
import collections, json, sys
from pathlib import Path
root = Path(sys.argv[1])
print((root / "steps.txt").read_text() if (root / "steps.txt").exists() else "no steps.txt")
reports = {p.parent.name: json.loads(p.read_text()) for p in sorted(root.glob("*/report.json"))}
for name, data in reports.items():
    cases = data.get("cases", [])
    print(f"== {name}: {len(cases)} cases", dict(collections.Counter(c["outcome"] for c in cases)))
    for case in cases:
        pages = case.get("details", {}).get("guard_page_reruns")
        gp = [f for f in case.get("findings", []) if f["detector"] == "guard_page"]
        if not (name == "pages" or pages or gp or case["failed"]):
            continue
        print(f"  {case['id']}: {case['outcome']} ({case.get('duration_s', 0)} s) {case['message'][:160]!r}")
        for f in case.get("findings", []):
            d = f.get("details", {})
            print(f"    {f['detector']} {f['kind']} {f['buffer']}/{f['region']} named={d.get('named', '-')} "
                  f"access={d.get('access', '-')!r} candidates={d.get('candidates', '-')}")
            print(f"      {f['note'][:300]}")
        if pages:
            print(f"    reruns ({pages['seconds']} s, stopped={pages['stopped']!r}, not run={pages['not_run']}):")
            for r in pages["runs"]:
                print(f"      {r['pages']}: {r['status']} {r['seconds']} s {r['message'][:80]!r}")
        passes = case.get("details", {}).get("passes")
        if passes and name == "pages":
            print(f"    passes: {[p['placement'] for p in passes]}")
for name in ("oob-reach", "oob-cross"):
    p = root / f"{name}.json"
    print(f"== {name}: {p.read_text()[:1500] if p.exists() else 'missing'}")
a, w = reports.get("matrix-all"), reports.get("matrix-watched")
if a and w:
    oa, ow = ({c["id"]: c["outcome"] for c in r["cases"]} for r in (a, w))
    diff = sorted(k for k in oa.keys() | ow.keys() if oa.get(k) != ow.get(k))
    print(f"== cover all vs watched: {len(diff)} cases differ")
    for k in diff:
        print(f"  {k}: all={oa.get(k)} watched={ow.get(k)}")
PY
cat "$R/summary.txt"
tar czf "$OUT/pages-runs.tgz" $(find .cache/runs -type d -name 'batch-*-pages' 2>/dev/null | head -400) 2>/dev/null
tar czhf "$OUT/reports.tgz" -C /tmp guardpage-r
cp "$R/summary.txt" "$R/steps.txt" "$OUT/" 2>/dev/null
