#!/usr/bin/env bash
# Issue 20 items 2-3 on the device machine (H200), one call, well under 5 minutes, everything under $OUT:
#   1. uninit mode on planted_uninit (Triton and CUDA): accumulate into torch.empty -> uninit_read of out,
#      grid one block short -> unwritten tail of out, both fixed twins clean;
#   2. racecheck on planted_race and synccheck on planted_barrier (CUDA): race -> racecheck race naming
#      race.cu's RACE line, divergent_barrier -> synccheck barrier naming a BARRIER line, fixed twins clean;
#   3. the two new scenarios under the default mode (both = guard + memcheck): their cost on the default
#      matrix (the default mode itself is unchanged), and that they add no failure there;
#   4. the raw worker logs and sanitizer XML of every run (the first recorded racecheck/synccheck output:
#      tests/data/sanitizer takes its fixtures from here).
# Wall times come from `date +%s` (no bc on the device). Each step has its own time limit.
set -u
# The image's python3 (its numpy is outside the bootstrap pins and the machine has no index: `make` would stop
# in bootstrap, see ci/gpu/README.md). Logs and reports go to a scratch folder; $OUT gets
# summary.txt, steps.txt and two archives (few files come back from the device).
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
source "$(dirname "$0")/runenv.sh"
OUT=${OUT:-/tmp/out}; fresh_run_folder detect-r; mkdir -p "$OUT"
BUDGET_S=280; T_START=$(date +%s)   # the whole call stays under 5 minutes: no step runs past the budget
LOGS="$R"
source "$(dirname "$0")/steps.sh"
scen() {  # scen NAME LIMIT MODE SCENARIO...
  local name=$1 limit=$2 mode=$3; shift 3
  local sel=(); for s in "$@"; do sel+=(--gpu-memsafety-scenario "$s"); done
  step "$name" "$limit" python3 -m pytest scenarios -p no:cacheprovider -q -rA --gpu-memsafety-mode "$mode" "${sel[@]}" \
    --gpu-memsafety-report-dir "$R/$name"
}
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$R/env.txt" 2>&1
# The two CUDA extensions are built once here (nvcc, ~35 s each cold), so the timed runs below are warm.
step build 120 python3 -c "import torch; from gpu_memsafety.kernels.planted import race, uninit; cc = torch.cuda.get_device_capability(); race._module(cc); uninit._cuda_module(cc); print('built for', cc)"
scen uninit 60 uninit planted_uninit
scen racecheck 90 racecheck planted_race
scen synccheck 60 synccheck planted_barrier
scen default-cost 60 both planted_uninit planted_race planted_barrier
step gpu-test 120 python3 -m pytest tests/gpu/test_detect.py -p no:cacheprovider -q -rA
# What each case came to: outcome, and every finding's kind, buffer, region, bytes, source and note.
python3 ci/gpu/summarize.py "$R" > "$R/summary.txt" 2>&1
cat "$R/summary.txt"
python3 -c "from gpu_memsafety.kernels.planted.race import source_line as s; print('race.cu lines: RACE', s('RACE'), 'BARRIER A', s('BARRIER A'), 'BARRIER B', s('BARRIER B'))" | tee -a "$R/summary.txt"
tar czf "$OUT/runs.tgz" .cache/runs 2>/dev/null
tar czhf "$OUT/reports.tgz" -C /tmp detect-r
cp /tmp/detect-r/summary.txt "$OUT/summary.txt"; cp /tmp/detect-r/steps.txt "$OUT/steps.txt"
