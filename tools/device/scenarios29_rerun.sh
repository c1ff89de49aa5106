#!/usr/bin/env bash
# The three upstream-bug scenarios of issue 29 again after the memcheck fix (adapters no longer check results that
# memcheck stopped the kernel from writing: RunContext.results_checkable): mode both for the gather and the
# metadata scenarios, memcheck alone for sampling's small case. Carry [".vendor"] as scenarios29_check.sh.
set -u -o pipefail
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
OUT=${OUT:-/tmp/out}; R=/tmp/s29r; mkdir -p "$OUT" "$R"
BUDGET_S=${BUDGET:-150}; T_START=$(date +%s); LOGS="$R"
source "$(dirname "$0")/steps.sh"
PY=.venv/bin/python
step bootstrap 60 make .venv/.bootstrap-gpu
for spec in "gather-both:both:block_table_row_gather" "metadata-both:both:paged_mqa_metadata_smem_read" \
            "sampling-both:both:sampling_threshold_overread"; do
  name=${spec%%:*}; rest=${spec#*:}; mode=${rest%%:*}; scen=${rest#*:}
  step "$name" 60 $PY -m pytest scenarios -p no:cacheprovider -q -rfEs -n 4 --dist loadgroup --gpu-memsafety-mode "$mode" \
    --gpu-memsafety-report-dir "$R/$name" --gpu-memsafety-scenario "$scen"
done
python3 tools/device/summarize.py "$R" > "$R/summary.txt" 2>&1
cp "$R/summary.txt" "$R/steps.txt" "$OUT/"; tar czf "$OUT/reports.tgz" --exclude='*.xml' -C "$R" . 2>/dev/null
