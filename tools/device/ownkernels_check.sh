#!/usr/bin/env bash
# Issue 16 on the device machine (H200), with the image's python (no bootstrap: the machine has no index),
# everything under $OUT (summary.txt, steps.txt, env.txt, reports.tgz):
#   1. the guide's example (harness/cli/example, copied to a directory outside the checkout) in mode `both` through
#      `--gpu-memsafety-scenario-path`: buggy variants an expected finding (4 B past `out`, guard markers and memcheck),
#      fixed variants clean;
#   2. `python -m gpu_memsafety new --cuda`: the generated CUDA scaffold's own test (load_inline build, buggy found,
#      fixed clean), and the Triton scaffold's test, on the GPU;
#   3. last_expert_oob_read, smoke + batched cases in mode `both` (typed variants now drive its adapter): the
#      outcomes of evidence run 9 (unpadded: expected finding; padded: clean; batched_*: as expected).
#      Carried: .vendor/ (make upstream's output), as for tools/device/lead_check.sh.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; R=/tmp/ownkernels-r; mkdir -p "$OUT" "$R"
T0=$(date +%s); BUDGET=${BUDGET:-540}
MINE=$(mktemp -d /tmp/my-kernels.XXXX); cp harness/cli/example/scale_store.py harness/cli/example/scale_kernel.py "$MINE/"
GEN=$(mktemp -d /tmp/generated.XXXX)
{ date -u; nvidia-smi -L; python3 -m gpu_memsafety env; } > "$R/env.txt" 2>&1
step() {  # step NAME LIMIT command...
  local name=$1 limit=$2; shift 2
  local left=$(( BUDGET - ($(date +%s) - T0) )); [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 10 ]; then echo "[$name] not run: budget spent" | tee -a "$R/steps.txt"; return; fi
  local t0=$(date +%s)
  timeout "$limit" "$@" > "$R/$name.log" 2>&1
  echo "[$name] $* -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$R/steps.txt" "$R/$name.log"
}
step list 60 python3 -m gpu_memsafety list --scenario-path "$MINE" --scenario scale_store
step example-both 150 python3 -m pytest scenarios -p no:cacheprovider -rfEs --gpu-memsafety-mode both --gpu-memsafety-scenario-path "$MINE" \
  --gpu-memsafety-scenario scale_store --gpu-memsafety-report-dir "$R/example-both"
step new-cuda 30 python3 -m gpu_memsafety new gen_cuda --cuda --path "$GEN/cuda"
step new-cuda-test 180 python3 -m pytest -p no:cacheprovider -q -rA "$GEN/cuda/test_gen_cuda.py"
step new-triton 30 python3 -m gpu_memsafety new gen_triton --path "$GEN/triton"
step new-triton-test 90 python3 -m pytest -p no:cacheprovider -q -rA "$GEN/triton/test_gen_triton.py"
step last-expert 200 python3 -m pytest scenarios -p no:cacheprovider -rfEs --gpu-memsafety-mode both --gpu-memsafety-scenario last_expert_oob_read \
  -m "smoke or batched" --gpu-memsafety-report-dir "$R/last-expert"
python3 - "$R" > "$R/summary.txt" 2>&1 <<'PY'
import json, sys
from collections import Counter
from pathlib import Path
for report in sorted(Path(sys.argv[1]).glob("*/report.json")):
    cases = json.loads(report.read_text()).get("cases", [])
    print(f"== {report.parent.name}: {len(cases)} cases {dict(Counter(c['outcome'] for c in cases))}")
    for case in cases:
        print(f"  {case['id']}: {case['outcome']} {case['message'][:200]!r}")
        for f in case.get("findings", []):
            print(f"    {f['detector']} {f['kind']} {f['buffer']}/{f['region']} {f['bytes']} B "
                  f"ranges={[(r['start'], r['end']) for r in f['ranges']][:3]}")
PY
for t in new-cuda-test new-triton-test; do echo "== $t"; tail -5 "$R/$t.log"; done >> "$R/summary.txt"
cat "$R/steps.txt"; grep "^==" "$R/summary.txt"
cp "$R/summary.txt" "$R/steps.txt" "$R/env.txt" "$OUT/"
cp -r "$GEN" "$R/generated" 2>/dev/null
tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
ls -la "$OUT"
