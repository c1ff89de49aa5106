#!/usr/bin/env bash
# Issue 24 on the H200: the installable package, case by case against the matrix from before the move, and a host
# repository outside the checkout. Everything under $OUT (summary.txt, compare.txt, steps.txt, env.txt, host.txt,
# reports.tgz). Carried: .vendor/ (make upstream's output), .devwhl/ (apache-tvm-ffi 0.1.11, cp312).
#
#   PART=matrix  `make sanitize` (bootstraps .venv with the editable install, as a fresh clone does) with
#                MATRIX_ARGS (default "-n 4 --gpu-memsafety-mode both": the default of before the move), compared case by case with
#                BASE (default evidence/h200/run15-cover-matrix/reports/matrix-all/report.json, cover=all, mode both).
#   PART=host    a host repository in /tmp/host with its own top-level kernels/ and fixtures/ packages: a Triton kernel
#                (the guide's example) and a CUDA C++ kernel (`gpu-memsafety new hostcuda --cuda`), each imported by its
#                scenario as `from kernels import ...`; run from the host's root with pytest started as its console
#                script does (python -P: nothing of the host on sys.path), no PYTHONPATH, mode both.
#   PART=all     host, then matrix.
# What it should show: matrix: every case common to both reports has the same outcome and the same findings
# (kind, buffer, region, bytes); cases new since the base are listed. host: buggy cases `expected finding` with the
# planted 4 bytes past `out` at their exact offsets (memcheck and markers), fixed cases clean.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
REPO=$PWD; OUT=${OUT:-/tmp/out}; R=/tmp/pkg-r; mkdir -p "$OUT" "$R"
PART=${PART:-all}; BUDGET_S=${BUDGET:-580}; T_START=$(date +%s); LOGS="$R"
MATRIX_ARGS=${MATRIX_ARGS:--n 4 --gpu-memsafety-mode both}
BASE=${BASE:-evidence/h200/run15-cover-matrix/reports/matrix-all/report.json}
source "$(dirname "$0")/steps.sh"
{ date -u; nvidia-smi -L; python3 -c "import numpy, torch, triton; print('numpy', numpy.__version__, 'torch', torch.__version__, 'triton', triton.__version__)"
  if ls .devwhl/*.whl > /dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps .devwhl/*.whl; echo "tvm-ffi rc=$?"; fi
} > "$R/env.txt" 2>&1
step bootstrap 120 make .venv/.bootstrap-gpu
.venv/bin/python -c "import gpu_memsafety, sys; print('gpu_memsafety from', gpu_memsafety.__file__, sys.version)" >> "$R/env.txt" 2>&1

if [ "$PART" = host ] || [ "$PART" = all ]; then
  H=/tmp/host; rm -rf "$H"; mkdir -p "$H/kernels" "$H/fixtures" "$H/gpu_scenarios"
  printf '"""The host repository own kernels."""\nHOST = True\n' > "$H/kernels/__init__.py"
  printf '"""The host repository own fixtures."""\nHOST = True\n' > "$H/fixtures/__init__.py"
  cp harness/cli/example/scale_kernel.py "$H/kernels/scale_kernel.py"
  sed 's/^import scale_kernel .*/from kernels import scale_kernel  # the host package/' harness/cli/example/scale_store.py > "$H/gpu_scenarios/scale_store.py"
  (cd /tmp && "$REPO/.venv/bin/python" -m gpu_memsafety new hostcuda --path /tmp/hostcuda-gen --cuda) >> "$R/host.txt" 2>&1
  cp /tmp/hostcuda-gen/hostcuda_kernel.py "$H/kernels/hostcuda_kernel.py"
  sed 's/^import hostcuda_kernel .*/from kernels import hostcuda_kernel  # the host package/' /tmp/hostcuda-gen/hostcuda.py > "$H/gpu_scenarios/hostcuda.py"
  grep -n "from kernels import" "$H"/gpu_scenarios/*.py >> "$R/host.txt"
  # (a script, not a function: `timeout` runs programs)
  printf '#!/usr/bin/env bash\ncd %s && exec env -u PYTHONPATH %s/.venv/bin/python -P -m pytest --gpu-memsafety-scenario-path gpu_scenarios -p no:cacheprovider -rfEs --gpu-memsafety-report-dir "%s/$1" "${@:2}"\n' "$H" "$REPO" "$R" > /tmp/hostrun.sh
  chmod +x /tmp/hostrun.sh
  step host-both 240 /tmp/hostrun.sh host-both --gpu-memsafety-mode both
  step host-guard 120 /tmp/hostrun.sh host-guard --gpu-memsafety-mode guard
fi
if [ "$PART" = matrix ] || [ "$PART" = all ]; then
  step matrix 560 make sanitize REPORTS="$R/matrix" PYTEST_ARGS="$MATRIX_ARGS"
fi
python3 tools/device/summarize.py "$R" > "$R/summary.txt" 2>&1
python3 - "$R/matrix/report.json" "$BASE" > "$R/compare.txt" 2>&1 <<'PY'
import json, sys
from collections import Counter
from pathlib import Path
def load(p):
    return {c["id"]: c for c in json.loads(Path(p).read_text())["cases"]} if Path(p).is_file() else None
new, base = load(sys.argv[1]), load(sys.argv[2])
if new is None:
    sys.exit(print("no matrix report (did not run or did not finish)"))
key = lambda c: (c["outcome"], sorted((f["kind"], f["buffer"], f["region"], f["bytes"]) for f in c.get("findings", [])))
common = sorted(set(new) & set(base))
print(f"after the move: {len(new)} cases {dict(Counter(c['outcome'] for c in new.values()))}")
print(f"base ({sys.argv[2]}): {len(base)} cases {dict(Counter(c['outcome'] for c in base.values()))}")
diff = [i for i in common if key(new[i]) != key(base[i])]
print(f"{len(common)} common cases, {len(diff)} differ in outcome or findings")
for i in diff:
    print(f"  {i}: before={key(base[i])} after={key(new[i])}\n      {new[i]['message'][:300]!r}")
print(f"only after the move ({len(set(new) - set(base))}): " + ", ".join(f"{i}={new[i]['outcome']}" for i in sorted(set(new) - set(base))))
print(f"only before ({len(set(base) - set(new))}): {sorted(set(base) - set(new))}")
print(f"wall: {json.loads(Path(sys.argv[1]).read_text())['run'].get('wall_s')}")
PY
cat "$R/steps.txt"; grep "^==" "$R/summary.txt"; cat "$R/compare.txt" | head -40
cp "$R/summary.txt" "$R/compare.txt" "$R/steps.txt" "$R/env.txt" "$OUT/"; [ -f "$R/host.txt" ] && cp "$R/host.txt" "$OUT/"
tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
ls -la "$OUT"
