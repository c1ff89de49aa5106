#!/usr/bin/env bash
# `make sanitize` on the device machine, split in two so that each part ends well inside one command's limit:
# the planted and padded-stride scenarios, then the last-expert scenario. Reports and logs under $OUT.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/r"
part() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s)
  timeout "$limit" make sanitize REPORTS="$OUT/r/$name" PYTEST_ARGS="$*" > "$OUT/r/$name.log" 2>&1
  local rc=$?
  echo "make sanitize REPORTS=$OUT/r/$name PYTEST_ARGS=\"$*\" -> rc=$rc wall_s=$(( $(date +%s) - t0 ))" | tee -a "$OUT/r/$name.log"
  tail -4 "$OUT/r/$name.log"
}
part sanitize-planted-padded 240 --gpu-memsafety-scenario planted_oob --gpu-memsafety-scenario padded_stride_scale_write
part sanitize-last-expert 330 --gpu-memsafety-scenario last_expert_oob_read
tar czf "$OUT/runs.tgz" .cache/runs 2>/dev/null
tar czf "$OUT/reports.tgz" -C "$OUT" r
