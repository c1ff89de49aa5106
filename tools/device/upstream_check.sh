#!/usr/bin/env bash
# Issue 14 on the device: the REAL upstream kernels under `make sanitize` (guard markers + memcheck).
# Run from a tree that carries .vendor/ (what `make upstream` unpacked: sglang 0.5.18/0.5.19 .cuh + JIT headers,
# triton_kernels copies A/C/D) and .devwhl/apache_tvm_ffi-0.1.11-cp312-abi3-*.whl (the device has no index).
#   1. what the machine has; apache-tvm-ffi from the carried wheel into the image's python (the image's numpy 2.5
#      is outside pyproject's pins, and `make`'s bootstrap cannot fetch another offline, so the make-sanitize
#      command is run directly with the image's python: `python3 -m gpu_memsafety.cli.upstream --if-missing` then
#      `python3 -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadfile --gpu-memsafety-mode both ...`)
#   2. sglang 0.5.18 / 0.5.19 built for sm_90a as sglang builds them (timed; the cases reuse the build)
#   3. padded_stride_scale_write, the sglang cases (all H x token counts, refusal contracts)
#   4. last_expert_oob_read, copies A, C (and D: unsupported on triton 3.6) x pads {none, sglang, vllm}
#      on the smoke + gpt-oss shapes and K=3072
# Reports and logs under $OUT (reports.tgz holds every report file).
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; R=/tmp/upstream-reports; mkdir -p "$OUT" "$R"   # at most 8 files come back: reports go in a tarball
LOG="$OUT/upstream_check.log"
{
  date -u; nvidia-smi -L; nvcc --version | tail -2; c++ --version | head -1; python3 --version
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  t0=$(date +%s)
  python3 -m pip install -q --no-index --no-deps .devwhl/apache_tvm_ffi-0.1.11-*.whl; echo "tvm-ffi install rc=$?"
  python3 -m gpu_memsafety.cli.upstream --if-missing; echo "upstream --if-missing rc=$?"
  python3 -m gpu_memsafety.cli.upstream --list
  t0=$(date +%s)
  python3 -c "
import time
from gpu_memsafety.kernels.pre_dispatch import sglang as S
for v in ('0.5.18', '0.5.19'):
    t = time.time(); lib = S.build(v, (9, 0)); print('built sglang', v, 'for sm_90a in', round(time.time() - t, 1), 's:', lib)
"; echo "build rc=$? ($(( $(date +%s) - t0 )) s)"
} > "$LOG" 2>&1
part() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" python3 -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadfile --gpu-memsafety-mode both \
    --gpu-memsafety-report-dir "$R/$name" "$@" > "$R/$name.log" 2>&1
  local rc=$?
  echo "python3 -m pytest scenarios -p no:cacheprovider -rfEs -n auto --dist loadfile --gpu-memsafety-mode both --gpu-memsafety-report-dir $R/$name $* -> rc=$rc wall_s=$(( $(date +%s) - t0 ))" | tee -a "$LOG" "$R/$name.log"
}
part padded-stride-sglang 120 --gpu-memsafety-scenario padded_stride_scale_write -k sglang
part last-expert-copies 210 --gpu-memsafety-scenario last_expert_oob_read -k '(tkA or tkC or tkD) and (gptoss or K2880-E4-N256 or K3072) and not batched and not tp4'
cat "$LOG"
for n in padded-stride-sglang last-expert-copies; do tail -25 "$R/$n.log"; cp "$R/$n.log" "$OUT/"; cp "$R/$n/summary.md" "$OUT/$n-summary.md"; done
tar czf "$OUT/reports.tgz" -C "$R" .
