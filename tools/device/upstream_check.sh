#!/usr/bin/env bash
# Issue 14 on the device: the REAL upstream kernels under `make sanitize` (guard markers + memcheck).
# Run from a tree that carries .vendor/ (what `make upstream` unpacked: sglang 0.5.18/0.5.19 .cuh + JIT headers,
# triton_kernels copies A/C/D) and .devwhl/apache_tvm_ffi-0.1.11-cp312-abi3-*.whl (the device has no index).
#   1. what the machine has; the venv (offline bootstrap) + apache-tvm-ffi from the carried wheel
#   2. sglang 0.5.18 / 0.5.19 built for sm_90a as sglang builds them (timed; the cases reuse the build)
#   3. padded_stride_scale_write, the sglang cases (all H x token counts, refusal contracts)
#   4. last_expert_oob_read, copies A, C (and D: unsupported on triton 3.6) x pads {none, sglang, vllm}
#      on the smoke + gpt-oss shapes and K=3072
# Reports and logs under $OUT (reports.tgz holds every report file).
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
LOG="$OUT/upstream_check.log"
{
  date -u; nvidia-smi -L; nvcc --version | tail -2; c++ --version | head -1; python3 --version
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  t0=$(date +%s)
  make .venv/.bootstrap-gpu > "$OUT/r/bootstrap.log" 2>&1; echo "bootstrap rc=$? ($(( $(date +%s) - t0 )) s)"
  .venv/bin/python -m pip install -q --no-index --no-deps .devwhl/apache_tvm_ffi-0.1.11-*.whl; echo "tvm-ffi install rc=$?"
  .venv/bin/python -m harness.upstream --list
  t0=$(date +%s)
  .venv/bin/python -c "
import time
from kernels.pre_dispatch import sglang as S
for v in ('0.5.18', '0.5.19'):
    t = time.time(); lib = S.build(v, (9, 0)); print('built sglang', v, 'for sm_90a in', round(time.time() - t, 1), 's:', lib)
"; echo "build rc=$? ($(( $(date +%s) - t0 )) s)"
} > "$LOG" 2>&1
part() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" make sanitize REPORTS="$OUT/r/$name" PYTEST_ARGS="$*" > "$OUT/r/$name.log" 2>&1
  local rc=$?
  echo "make sanitize REPORTS=\$OUT/r/$name PYTEST_ARGS=\"$*\" -> rc=$rc wall_s=$(( $(date +%s) - t0 ))" | tee -a "$LOG" "$OUT/r/$name.log"
}
part padded-stride-sglang 150 --scenario padded_stride_scale_write -k sglang
part last-expert-copies 250 --scenario last_expert_oob_read -k "'(tkA or tkC or tkD) and (gptoss or K2880-E4-N256 or K3072) and not batched and not tp4'"
cat "$LOG"
for n in padded-stride-sglang last-expert-copies; do tail -25 "$OUT/r/$n.log"; done
tar czf "$OUT/reports.tgz" -C "$OUT" r
cp "$OUT/r/padded-stride-sglang/summary.md" "$OUT/padded-stride-sglang-summary.md" 2>/dev/null
cp "$OUT/r/last-expert-copies/summary.md" "$OUT/last-expert-copies-summary.md" 2>/dev/null
