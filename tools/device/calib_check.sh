#!/usr/bin/env bash
# Issue 20 item 4 (poison, reads inside the allocation) and the uninit leftover, on the device machine (H200), one
# call, under 5 minutes, everything under $OUT (summary.txt, steps.txt, reports.tgz: three files):
#   1. planted_inside (Triton and CUDA C++) in poison mode: packed_stride_read -> poison overread of scale/row_padding,
#      32 B at 72..80, 152..160, 232..240, 312..320; unused_rows_read -> poison overread of scale/unused_row, 216 B at
#      400..472, 480..552, 560..632; strided_read and used_rows_read clean;
#   2. planted_inside in modes both and guard: the buggy variants `not applicable` ("visible only to poison ...
#      memcheck cannot see reads inside an allocation"), the fixed twins clean, no finding from memcheck;
#   3. padded_stride_scale_write (our CUDA kernel and its Triton twin) in uninit mode: every packed case with padded
#      rows and every strided_on_packed case an expected finding (unwritten scale bytes as modelled, e.g. H=2304 5/8:
#      token 4's bytes 40..71, 360..392) besides the padding overwrite the markers see; strided and unpadded clean.
# Wall times come from `date +%s` (no bc on the device). Each step has its own time limit.
set -u
# The image's python3 (its numpy is outside the bootstrap pins and the machine has no index: see lead_check.sh).
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; R=/tmp/calib-r; mkdir -p "$OUT" "$R"
BUDGET_S=280; T_START=$(date +%s)
step() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) left=$(( BUDGET_S - ($(date +%s) - T_START) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then echo "[$name] skipped: the 5-minute budget is spent" | tee -a "$R/steps.txt"; return; fi
  timeout "$limit" "$@" > "$R/$name.log" 2>&1
  local rc=$?
  echo "[$name] $* -> rc=$rc wall_s=$(( $(date +%s) - t0 ))" | tee -a "$R/$name.log" "$R/steps.txt"
  tail -3 "$R/$name.log"
}
scen() {  # scen NAME LIMIT MODE SCENARIO [pytest args...]
  local name=$1 limit=$2 mode=$3 scenario=$4; shift 4
  step "$name" "$limit" python3 -m pytest scenarios -p no:cacheprovider -q -rA --mode "$mode" --scenario "$scenario" \
    --report-dir "$R/$name" "$@"
}
{ nvidia-smi -L; python3 -m harness env; } > "$R/env.txt" 2>&1
# The CUDA extensions are built once here (nvcc), so the timed runs below are warm.
step build 150 python3 -c "import torch; from kernels.planted import inside; cc = torch.cuda.get_device_capability(); inside._cuda_module(cc); print('built for', cc)"
scen inside-poison 60 poison planted_inside
scen inside-both 60 both planted_inside
scen inside-guard 40 guard planted_inside
scen padded-uninit 100 uninit padded_stride_scale_write -k "not sglang"
# What each case came to: outcome, and every finding's kind, buffer, region, bytes, ranges and note.
python3 - "$R" > "$R/summary.txt" 2>&1 <<'PY'
import json, sys
from pathlib import Path
for report in sorted(Path(sys.argv[1]).glob("*/report.json")):
    data = json.loads(report.read_text())
    s = data.get("summary", {})
    print(f"== {report.parent.name}: {s.get('status')} {s.get('counts')}")
    for case in data.get("cases", []):
        print(f"  {case['id']}: {case['outcome']} ({case.get('duration_s', 0)} s) {case['message'][:200]!r}")
        for f in case.get("findings", []):
            print(f"    {f['detector']} {f['kind']} {f['buffer']}/{f['region']} {f['bytes']} B x{f['count']} "
                  f"kernel={f['kernel']} ranges={[(r['start'], r['end']) for r in f['ranges']][:8]}")
            print(f"      {f['note'][:300]}")
PY
cat "$R/summary.txt"
tar czhf "$OUT/reports.tgz" -C /tmp calib-r
cp "$R/summary.txt" "$OUT/summary.txt"; cp "$R/steps.txt" "$OUT/steps.txt"
