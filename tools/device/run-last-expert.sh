#!/usr/bin/env bash
# Last-expert scenario on the device: `make sanitize` for it, then guard-page and poison modes on the smoke
# and gpt-oss cases, then `repro` in every mode (stress included). Reports and logs under $OUT.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
t0=$(date +%s)
timeout 300 make sanitize REPORTS="$OUT/r/sanitize-last-expert" PYTEST_ARGS="--gpu-memsafety-scenario last_expert_oob_read" > "$OUT/r/sanitize-last-expert.log" 2>&1
echo "make sanitize PYTEST_ARGS=--gpu-memsafety-scenario last_expert_oob_read -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/r/sanitize-last-expert.log"
tail -3 "$OUT/r/sanitize-last-expert.log"
for mode in guard_page poison; do
  t0=$(date +%s)
  timeout 100 .venv/bin/python -m pytest scenarios -p no:cacheprovider -q --gpu-memsafety-scenario last_expert_oob_read --gpu-memsafety-tag smoke --gpu-memsafety-mode $mode --gpu-memsafety-report-dir "$OUT/r/last-expert-$mode" > "$OUT/r/last-expert-$mode.log" 2>&1
  echo "pytest --gpu-memsafety-mode $mode --gpu-memsafety-tag smoke -> rc=$? wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/r/last-expert-$mode.log"
done
timeout 120 .venv/bin/python -m gpu_memsafety repro last_expert_oob_read --variant unpadded --set K=2880 --set E=4 --mode all --loop 10 --json "$OUT/r/repro-last-expert.json" > "$OUT/r/repro-last-expert.log" 2>&1
echo "repro -> rc=$?" >> "$OUT/r/repro-last-expert.log"; cat "$OUT/r/repro-last-expert.log"
tar czf "$OUT/runs.tgz" .cache/runs 2>/dev/null
tar czf "$OUT/reports.tgz" -C "$OUT" r
