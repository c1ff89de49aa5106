#!/usr/bin/env bash
# Issue 16 on the device machine (H200), one call, under 5 minutes, everything under $OUT:
#   1. the guide's example (docs/example, copied to a directory outside the checkout) through
#      `make sanitize SCENARIO_PATH=... MODE=both`: buggy variants an expected finding under guard markers AND
#      memcheck (4 B past out), fixed variants clean;
#   2. `python -m harness new --cuda`: the generated CUDA scaffold's own test passes on the GPU (load_inline
#      build, buggy variant found, fixed clean), and the Triton scaffold's too;
#   3. last_expert_oob_read (typed variants now drive the adapter) smoke + batched cases under `both`: the same
#      outcomes as evidence/h200 (unpadded: expected finding; padded: clean; batched_*: as expected);
#   4. python -m harness list --scenario-path on the example dir.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
BUDGET_S=280; T_START=$(date +%s)
step() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) left=$(( BUDGET_S - ($(date +%s) - T_START) ))
  [ "$left" -lt "$limit" ] && limit=$left
  if [ "$limit" -le 5 ]; then echo "[$name] skipped: the 5-minute budget is spent" | tee -a "$OUT/r/steps.txt"; return; fi
  timeout "$limit" "$@" > "$OUT/r/$name.log" 2>&1
  local rc=$?
  echo "[$name] $* -> rc=$rc wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/r/$name.log" "$OUT/r/steps.txt"
  tail -3 "$OUT/r/$name.log"
}
MINE=$(mktemp -d /tmp/my-kernels.XXXX); cp docs/example/scale_store.py docs/example/scale_kernel.py "$MINE/"
GEN=$(mktemp -d /tmp/generated.XXXX)
{ nvidia-smi -L; python3 -m harness env; } > "$OUT/r/env.txt" 2>&1
step bootstrap 90 make .venv/.bootstrap-gpu
step list 30 .venv/bin/python -m harness list --scenario-path "$MINE" --scenario scale_store
step example-both 90 make sanitize MODE=both SCENARIO_PATH="$MINE" REPORTS="$OUT/r/example-both" \
  PYTEST_ARGS="--scenario scale_store"
step new-cuda 20 .venv/bin/python -m harness new gen_cuda --cuda --path "$GEN/cuda"
step new-cuda-test 120 .venv/bin/python -m pytest -p no:cacheprovider -q -rA "$GEN/cuda/test_gen_cuda.py"
step new-triton 20 .venv/bin/python -m harness new gen_triton --path "$GEN/triton"
step new-triton-test 60 .venv/bin/python -m pytest -p no:cacheprovider -q -rA "$GEN/triton/test_gen_triton.py"
step last-expert 120 .venv/bin/python -m pytest scenarios -p no:cacheprovider -q -rA --mode both \
  --scenario last_expert_oob_read -m "smoke or batched" --report-dir "$OUT/r/last-expert"
cp -r "$GEN" "$OUT/r/generated" 2>/dev/null
