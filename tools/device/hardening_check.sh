#!/usr/bin/env bash
# Issue 27 (hardening) on the H200: what the CPU tests cannot show. Everything under $OUT (summary.txt, compare.txt,
# procs.txt, shards.txt, host.txt, steps.txt, env.txt, reports.tgz). Carried: .vendor/ (make upstream's output),
# .devwhl/ (apache-tvm-ffi 0.1.11, cp312), as for package_check.sh.
#
#   matrix  `make sanitize` through the new Makefile (values quoted, PYTEST_ARGS split by cli/makeargs.py) with
#           MATRIX_ARGS (default "-n 4"), mode both: every case common with BASE (run 18's matrix) must keep its
#           outcome and findings, now that case workers and the runner are child subreapers and reap what a case
#           leaves running (compute-sanitizer's launcher, its subreaper and the target included: a sanitized case
#           must still attach and report). procs.txt counts details.stray_processes and left_behind: expected 0.
#   shards  planted_oob as 2 shards of one run group (SHARD=k/2 RUN_GROUP=...), merged: exit 0, status passed, the
#           manifests equal, the merged case ids and outcomes those of the same cases in the matrix run.
#   host    the guide's example from a scenario path (its kernel module imports torch and triton at the top): the
#           file is vetted in a child process first (within GPU_MEMSAFETY_IMPORT_TIMEOUT), then runs in mode both:
#           buggy cases `expected finding`, fixed ones clean.
# At the end no case worker, sanitizer or vetting child may be left running (ps).
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
REPO=$PWD; OUT=${OUT:-/tmp/out}; R=/tmp/hard-r; mkdir -p "$OUT" "$R"
BUDGET_S=${BUDGET:-580}; T_START=$(date +%s); LOGS="$R"
MATRIX_ARGS=${MATRIX_ARGS:--n 4}
BASE=${BASE:-evidence/h200/run18-package-matrix/reports/matrix/report.json}
source "$(dirname "$0")/steps.sh"
{ date -u; nvidia-smi -L; python3 -c "import numpy, torch, triton; print('numpy', numpy.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
  if ls .devwhl/*.whl > /dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps .devwhl/*.whl; echo "tvm-ffi rc=$?"; fi
} > "$R/env.txt" 2>&1
step bootstrap 120 make .venv/.bootstrap-gpu
.venv/bin/python -c "import gpu_memsafety, sys; print('gpu_memsafety from', gpu_memsafety.__file__, sys.version)" >> "$R/env.txt" 2>&1

step matrix 330 make sanitize MODE=both REPORTS="$R/matrix" PYTEST_ARGS="$MATRIX_ARGS"
for k in 1 2; do
  step "shard$k" 60 make sanitize MODE=both SHARD="$k/2" RUN_GROUP="h200-hardening-$T_START" REPORTS="$R/shard$k" \
    PYTEST_ARGS="-n 2 --gpu-memsafety-scenario planted_oob"
done
step merge 30 .venv/bin/python -m gpu_memsafety merge "$R/shard1/report.json" "$R/shard2/report.json" -o "$R/merged"
H=/tmp/hard-host; rm -rf "$H"; mkdir -p "$H"
cp harness/cli/example/scale_kernel.py harness/cli/example/scale_store.py "$H/"
step host 120 env GPU_MEMSAFETY_IMPORT_TIMEOUT=120 .venv/bin/python -m pytest -p no:cacheprovider -rfEs --gpu-memsafety-mode both \
  --gpu-memsafety-scenario-path "$H" --gpu-memsafety-scenario scale_store --gpu-memsafety-report-dir "$R/host" "$H"

python3 tools/device/summarize.py "$R" > "$R/summary.txt" 2>&1
python3 - "$R" "$BASE" <<'PY'
import json, sys
from collections import Counter
from pathlib import Path
R, base_path = Path(sys.argv[1]), Path(sys.argv[2])
def load(p):
    return json.loads(p.read_text()) if p.is_file() else None
def cases(doc):
    return {c["id"]: c for c in doc["cases"]} if doc else {}
key = lambda c: (c["outcome"], sorted((f["kind"], f["buffer"], f["region"], f["bytes"]) for f in c.get("findings", [])))
matrix, base = load(R / "matrix/report.json"), load(base_path)
with open(R / "compare.txt", "w") as out:
    if matrix is None:
        print("no matrix report (did not run or did not finish)", file=out)
    else:
        new, old = cases(matrix), cases(base)
        common = sorted(set(new) & set(old))
        diff = [i for i in common if key(new[i]) != key(old[i])]
        print(f"matrix: {len(new)} cases {dict(Counter(c['outcome'] for c in new.values()))}", file=out)
        print(f"base ({base_path}): {len(old)} cases", file=out)
        print(f"{len(common)} common cases, {len(diff)} differ in outcome or findings", file=out)
        for i in diff:
            print(f"  {i}: before={key(old[i])} after={key(new[i])}\n      {new[i]['message'][:300]!r}", file=out)
        print(f"only now ({len(set(new) - set(old))}): " + ", ".join(f"{i}={new[i]['outcome']}" for i in sorted(set(new) - set(old))), file=out)
with open(R / "procs.txt", "w") as out:
    for name in ("matrix", "shard1", "shard2", "host"):
        doc = load(R / name / "report.json")
        if doc is None:
            print(f"{name}: no report", file=out); continue
        stray = {c["id"]: c["details"]["stray_processes"] for c in doc["cases"] if c["details"].get("stray_processes")}
        left = [p for b in doc["run"].get("batches") or [] for proc in b.get("processes", []) for p in proc.get("left_behind", [])]
        print(f"{name}: {len(doc['cases'])} cases, {len(stray)} with stray_processes, {len(left)} processes left behind by a worker", file=out)
        for cid, items in stray.items():
            print(f"  stray {cid}: {items}", file=out)
        for item in left:
            print(f"  left behind: {item}", file=out)
with open(R / "shards.txt", "w") as out:
    merged, s1, s2 = load(R / "merged/merged.json"), load(R / "shard1/report.json"), load(R / "shard2/report.json")
    if merged is None or s1 is None or s2 is None:
        print("shards or merge missing", file=out)
    else:
        m1, m2 = s1["run"]["shard"].get("manifest"), s2["run"]["shard"].get("manifest")
        print(f"merged status: {merged['summary']['status']}; shards: {json.dumps(merged['shards'])}", file=out)
        print(f"manifests equal: {m1 == m2}; matrix {len((m1 or {}).get('matrix', []))} cases, group {(m1 or {}).get('group')}, "
              f"commit {(m1 or {}).get('commit')}, cost {(m1 or {}).get('cost_hash', '')[:12]}", file=out)
        got = {c["id"]: c["outcome"] for c in merged["cases"]}
        want = {i: c["outcome"] for i, c in cases(matrix).items() if i in got} if matrix else {}
        print(f"merged cases: {len(got)}; same ids and outcomes as the matrix run's: {got == want and bool(got)}", file=out)
        for i in sorted(set(got) | set(want)):
            if got.get(i) != want.get(i):
                print(f"  {i}: merged={got.get(i)} matrix={want.get(i)}", file=out)
with open(R / "host.txt", "w") as out:
    doc = load(R / "host/report.json")
    print("no host report" if doc is None else "\n".join(f"{c['id']}: {c['outcome']}" for c in doc["cases"]), file=out)
PY
ps -eo pid,ppid,pgid,etimes,cmd | grep -E "gpu_memsafety\.(engine\.worker|scenario\.vet_child)|compute-sanitizer" | grep -v grep > "$R/ps-after.txt"
echo "processes of the harness still running after the script: $(wc -l < "$R/ps-after.txt")" >> "$R/procs.txt"
cat "$R/ps-after.txt" >> "$R/procs.txt"
cat "$R/steps.txt"; grep "^==" "$R/summary.txt"; head -30 "$R/compare.txt"; cat "$R/procs.txt" "$R/shards.txt" "$R/host.txt"
cp "$R/summary.txt" "$R/compare.txt" "$R/procs.txt" "$R/shards.txt" "$R/host.txt" "$R/steps.txt" "$R/env.txt" "$OUT/"
tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
ls -la "$OUT"
