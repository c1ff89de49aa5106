#!/usr/bin/env bash
# Issue 19 on the device machine (H200), one call, under 5 minutes, everything under $OUT:
#   1. the planted scenario (every calibration case, Triton and CUDA) with `make sanitize`'s default mode
#      (both = guard markers + memcheck): vec16_overread -> overread of src past_end 8 B (4008..4016), never
#      "misaligned"; vec16_clean -> clean; atomic_past_end -> overwrite of dst past_end 4 B (4000..4004, access
#      atomic); far_write -> overwrite of dst before_start 4 B, "2,147,483,648 B before dst", after the batch
#      was rerun one case per process (rerun-alone.txt), and every clean case of the batch clean;
#   2. the same scenario under guard_page and poison (alignment tail: the atomic lands in it). Under guard_page the
#      n4000-x1 overread cases are "not applicable" ("... lie in src's alignment tail, before its guard page at
#      byte 4096, so not visible to guard_page in this placement"), the overwrite cases an expected finding seen
#      by the guard markers (dst/past_end 1 B, 4000..4001), never "unexpectedly clean"; gp_reach_overread (n=4096) and
#      gp_cross_overwrite (n=4000, extra=200) fault on the page: expected finding, guard_page finding of src (reach) and
#      dst (cross), named by reruns with one buffer on a page (harness/gpu_memsafety/detectors/pageprobe.py; before issue 20 item 4: src|dst),
#      past_end, details access "read or write";
#   3. the reports, the raw worker logs and sanitizer XML (the first recorded atomic/misaligned records, if
#      any, for tests/data/sanitizer).
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; rm -rf -- "$OUT/r"; mkdir -p "$OUT/r"     # this call's own
BUDGET_S=280; T_START=$(date +%s)
LOGS="$OUT/r"
source "$(dirname "$0")/steps.sh"
scen() {  # scen NAME LIMIT MODE
  local name=$1 limit=$2 mode=$3
  step "$name" "$limit" .venv/bin/python -m pytest scenarios -p no:cacheprovider -q -rA --gpu-memsafety-mode "$mode" \
    --gpu-memsafety-scenario planted_oob --gpu-memsafety-report-dir "$OUT/r/$name"
}
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$OUT/r/env.txt" 2>&1
step bootstrap 90 make .venv/.bootstrap-gpu
step build 90 .venv/bin/python -c "import torch; from gpu_memsafety.kernels.planted import cuda; print(cuda.build(torch.cuda.get_device_capability()))"
scen both 120 both
scen guard_page 40 guard_page
# Guard page past the alignment tail: a 4,096-byte tensor has no tail, so byte 4096 is on the unmapped page (a
# fault, matched as an access of either kind); n=4000 with extra=200 crosses its 96-byte tail into the page.
step gp_reach_overread 30 .venv/bin/python -m gpu_memsafety repro planted_oob --variant overread --set impl=triton --set n=4096 \
  --set extra=1 --mode guard_page --json "$OUT/r/gp_reach_overread.json"
step gp_cross_overwrite 30 .venv/bin/python -m gpu_memsafety repro planted_oob --variant overwrite --set impl=triton --set n=4000 \
  --set extra=200 --mode guard_page --json "$OUT/r/gp_cross_overwrite.json"
scen poison 40 poison
.venv/bin/python - "$OUT/r" > "$OUT/r/summary.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path
for report in sorted(Path(sys.argv[1]).glob("*/report.json")):
    data = json.loads(report.read_text())
    print(f"== {report.parent.name}")
    for case in data.get("cases", []):
        print(f"  {case['id']}: {case['outcome']} {case['message'][:200]!r}")
        for f in case.get("findings", []):
            print(f"    {f['detector']} {f['kind']} {f['buffer']}/{f['region']} {f['bytes']} B x{f['count']} "
                  f"kernel={f['kernel']} ranges={[(r['start'], r['end']) for r in f['ranges']][:4]}")
            print(f"      note={f['note'][:200]!r} details={f.get('details')}")
EOF
cat "$OUT/r/summary.txt"
find .cache/runs reports -name rerun-alone.txt 2>/dev/null | head -5 | xargs -r tail -n +1 >> "$OUT/r/summary.txt"
tar czf "$OUT/runs.tgz" .cache/runs 2>/dev/null
tar czf "$OUT/reports.tgz" -C "$OUT" r
