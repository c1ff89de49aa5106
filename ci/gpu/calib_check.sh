#!/usr/bin/env bash
# Issue 20 item 4 (poison, reads inside the allocation) and the uninit leftover, on the device machine (H200), one
# call, under 8 minutes, everything under $OUT (summary.txt, steps.txt, reports.tgz, racecheck-h200.txt,
# synccheck-h200.txt: five files):
#   1. planted_inside (Triton and CUDA C++) in poison mode: packed_stride_read -> poison overread of scale/row_padding,
#      32 B at 72..80, 152..160, 232..240, 312..320; unused_rows_read -> poison overread of scale/unused_row, 216 B at
#      400..472, 480..552, 560..632; strided_read and used_rows_read clean;
#   2. planted_inside in modes both and guard: the buggy variants `not applicable` ("visible only to poison ...
#      memcheck cannot see reads inside an allocation"), the fixed twins clean, no finding from memcheck;
#   3. padded_stride_scale_write (our CUDA kernel and its Triton twin) in uninit mode: every packed case with padded
#      rows and every strided_on_packed case an expected finding (unwritten scale bytes as modelled, e.g. H=2304 5/8:
#      token 4's bytes 40..71, 360..392) besides the padding overwrite the markers see; strided and unpadded clean;
#   4. racecheck on planted_race and synccheck on planted_barrier (as in run 12), keeping the tools' own text output
#      (the sanitized worker's log) as racecheck-h200.txt and synccheck-h200.txt: the first real racecheck and
#      synccheck output for the parser's fixtures (tests/data/sanitizer holds fabricated ones so far).
# Wall times come from `date +%s` (no bc on the device). Each step has its own time limit.
set -u
# The image's python3 (its numpy is outside the bootstrap pins and the machine has no index: see the bootstrap note in ci/gpu/README.md).
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
source "$(dirname "$0")/runenv.sh"
OUT=${OUT:-/tmp/out}; fresh_run_folder calib-r; mkdir -p "$OUT"
BUDGET_S=450; T_START=$(date +%s)
LOGS="$R"
source "$(dirname "$0")/steps.sh"
scen() {  # scen NAME LIMIT MODE SCENARIO [pytest args...]
  local name=$1 limit=$2 mode=$3 scenario=$4; shift 4
  step "$name" "$limit" python3 -m pytest scenarios -p no:cacheprovider -q -rA --gpu-memsafety-mode "$mode" --gpu-memsafety-scenario "$scenario" \
    --gpu-memsafety-report-dir "$R/$name" "$@"
}
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$R/env.txt" 2>&1
# The CUDA extensions are built once here (nvcc), so the timed runs below are warm.
step build 150 python3 -c "import torch; from gpu_memsafety.kernels.planted import inside; cc = torch.cuda.get_device_capability(); inside._cuda_module(cc); print('built for', cc)"
scen inside-poison 60 poison planted_inside
scen inside-both 60 both planted_inside
scen inside-guard 40 guard planted_inside
scen padded-uninit 120 uninit padded_stride_scale_write -k "not sglang"
scen racecheck 90 racecheck planted_race
scen synccheck 60 synccheck planted_barrier
# The sanitized workers' logs hold the tools' text (the judge parses racecheck/synccheck from it): keep one of each.
for pair in "racecheck:RACECHECK SUMMARY" "synccheck:Barrier error detected"; do
  tool=${pair%%:*}; mark=${pair#*:}
  log=$(find .cache/runs -name worker.log -newer "$R/env.txt" -exec grep -l "$mark" {} + 2>/dev/null | head -1)
  if [ -n "$log" ]; then { echo "# $log"; cat "$log"; } > "$OUT/$tool-h200.txt"; else echo "no $tool log found" | tee -a "$R/steps.txt"; fi
done
# What each case came to: outcome, and every finding's kind, buffer, region, bytes, ranges and note.
python3 ci/gpu/summarize.py "$R" > "$R/summary.txt" 2>&1
cat "$R/summary.txt"
tar czhf "$OUT/reports.tgz" -C /tmp calib-r
cp "$R/summary.txt" "$OUT/summary.txt"; cp "$R/steps.txt" "$OUT/steps.txt"
