#!/usr/bin/env bash
# Several device scripts in one call (the device returns at most 8 files): each runs with its own $OUT under
# /tmp/batch/<name>, its output in <name>.log; everything comes back as $OUT/batch.tgz plus $OUT/batch.txt (each
# script's exit code, wall time and the tail of its output).
#   bash ci/gpu/batch.sh "NAME=VAR=VALUE...:script.sh" ...     e.g. "h:BUDGET=420:ci/gpu/heldout_check.sh"
set -u
source "$(dirname "$0")/runenv.sh"
OUT=${OUT:-/tmp/out}; fresh_run_folder batch; B=$R; mkdir -p "$OUT"; fresh_file "$OUT/batch.txt"
for spec in "$@"; do
  name=${spec%%:*}; rest=${spec#*:}; script=${rest##*:}; vars=${rest%:*}; [ "$vars" = "$script" ] && vars=""
  mkdir -p "$B/$name"; t0=$(date +%s)
  env OUT="$B/$name" $vars bash "$script" > "$B/$name.log" 2>&1
  rc=$?
  { echo "== $name ($script $vars): rc=$rc wall_s=$(( $(date +%s) - t0 ))"; tail -25 "$B/$name.log"; } | tee -a "$OUT/batch.txt"
done
tar czf "$OUT/batch.tgz" -C "$B" . 2>/dev/null
ls -la "$OUT"
