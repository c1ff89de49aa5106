#!/usr/bin/env bash
# Issue 29 on the device machine (H200), one call: the three new upstream-bug scenarios on their buggy and fixed
# published versions, each in the modes that should see its bug. Carry [".vendor"] holding what
# `python -m gpu_memsafety.cli.upstream --only vllm-0.27.1 --only vllm-0.33.0 --only flashinfer-0.7.1
# --only flashinfer-0.7.2` unpacked (about 2 MB; the wheels themselves stay off the device). Under $OUT:
# summary.txt (every case and finding), steps.txt, env.txt, builds.txt, reports.tgz.
#   1. `make .venv/.bootstrap-gpu` (the editable install, offline, reusing the image's torch), what the machine has,
#      and which vendor folders are present (nothing is fetched: no index here)
#   2. the builds, timed: DeepGEMM's SM90 metadata kernel from each vLLM (3 instantiations each), FlashInfer's
#      top-k sampling from each flashinfer-python, vLLM's Triton gather from each vLLM's cache_utils.py
#   3. each scenario in mode both (guard markers + memcheck): the buggy versions' findings, exact where the model is
#   4. the global-memory overreads also in guard_page (both) and poison (the gather: its loads become slot ids)
#   BUDGET=470 (seconds for the whole call)
set -u -o pipefail
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build" GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; R=/tmp/scenarios29-r; mkdir -p "$OUT" "$R"
BUDGET_S=${BUDGET:-470}; T_START=$(date +%s); LOGS="$R"
source "$(dirname "$0")/steps.sh"
PY=.venv/bin/python
step bootstrap 120 make .venv/.bootstrap-gpu
scen() {  # scen NAME LIMIT MODE pytest-selection...
  local name=$1 limit=$2 mode=$3; shift 3
  step "$name" "$limit" $PY -m pytest scenarios -p no:cacheprovider -q -rfEs -n 4 --dist loadgroup --gpu-memsafety-mode "$mode" \
    --gpu-memsafety-report-dir "$R/$name" "$@"
}
{ date -u; nvidia-smi -L; nvcc --version | tail -2; ls /usr/local/cuda/include/curand.h
  $PY -c "import gpu_memsafety; print('gpu_memsafety from', gpu_memsafety.__file__)"
  $PY -m gpu_memsafety env; $PY -m gpu_memsafety.cli.upstream --list; du -sh .vendor/*
} > "$R/env.txt" 2>&1
step builds 200 $PY - <<'EOF'
# Every build of the three scenarios, in parallel (16 cores), timed; the cases reuse them from the cache.
import time, torch
from concurrent.futures import ThreadPoolExecutor
from gpu_memsafety.kernels.paged_mqa_metadata import build as DG
from gpu_memsafety.kernels.topk_sampling import build as FI
from gpu_memsafety.kernels.block_table_gather import vllm_kernel as VK
cap = tuple(torch.cuda.get_device_capability())
def timed(what, fn, *args):
    t = time.time()
    try:
        out = fn(*args)
        return f"{what}: {time.time() - t:.1f} s: {out}"
    except Exception as exc:
        return f"{what}: FAILED after {time.time() - t:.1f} s: {type(exc).__name__}: {exc}"
jobs = [(f"DeepGEMM metadata, vLLM {v}, <{bs}, 256, {sms}>", DG.build, v, bs, sms, cap)
        for v in ("0.27.1", "0.33.0") for bs, sms in ((32, 132), (128, 78), (33, 132))]
jobs += [(f"flashinfer {v} top-k sampling", FI.build, v, cap) for v in ("0.7.1", "0.7.2")]
with ThreadPoolExecutor(8) as pool:
    for line in pool.map(lambda job: timed(*job), jobs):
        print(line)
for v in ("0.27.1", "0.33.0"):
    print(timed(f"vLLM {v} gather kernel (Triton, loaded)", VK.load, v))
EOF
cp "$R/builds.log" "$R/builds.txt" 2>/dev/null
scen metadata-both 90 both --gpu-memsafety-scenario paged_mqa_metadata_smem_read
scen gather-both 60 both --gpu-memsafety-scenario block_table_row_gather
scen sampling-both 90 both --gpu-memsafety-scenario sampling_threshold_overread
scen gather-guard_page 60 guard_page --gpu-memsafety-scenario block_table_row_gather
scen gather-poison 60 poison --gpu-memsafety-scenario block_table_row_gather
scen sampling-guard_page 60 guard_page --gpu-memsafety-scenario sampling_threshold_overread
$PY tools/device/summarize.py "$R" > "$R/summary.txt" 2>&1
cat "$R/steps.txt"; grep "^==" "$R/summary.txt"
cp "$R/summary.txt" "$R/steps.txt" "$R/env.txt" "$OUT/"; [ -f "$R/builds.txt" ] && cp "$R/builds.txt" "$OUT/"
tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
ls -la "$OUT"
