#!/usr/bin/env bash
# Issue 18 items 2-3 and the report parts of issue 15 on the device machine (H200), one call, under 9 minutes,
# everything under $OUT/reports-check:
#   1. `make sanitize` (the default matrix, mode both): the terminal output (sanitize.log) and the report set.
#      Expect: the harness section ("GPU memory-safety: kernel x architecture" to the end) fits one screen,
#      known bugs one line per kernel, the headline last ("PASSED: N ran[, M not run (...)]"), pytest's line
#      and "as pytest counts them" agreeing; summary.md's first line the same headline; files mode 0644.
#   2. report.json validated by the loader (`python -m gpu_memsafety merge`, exit 0) and, where jsonschema is
#      installed, against docs/report.schema.json; the same file under a hard link refused (exit 2).
#   3. an interrupted run: `make smoke` sent SIGTERM after 40 s: the reports say "interrupted: N of M cases
#      ran", list the cases never started, the exit code is non-zero, and no file holds another run's id.
set -u
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}/reports-check; mkdir -p "$OUT"
T_START=$(date +%s)
log() { echo "$*" | tee -a "$OUT/steps.txt"; }
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$OUT/env.txt" 2>&1
make .venv/.bootstrap-gpu > "$OUT/bootstrap.log" 2>&1; log "bootstrap rc=$?"

# 1. the default matrix
t0=$(date +%s)
timeout 420 make sanitize REPORTS="$OUT/sanitize" > "$OUT/sanitize.log" 2>&1
log "make sanitize rc=$? wall_s=$(( $(date +%s) - t0 ))"
sed -n '/GPU memory-safety: kernel x architecture/,$p' "$OUT/sanitize.log" > "$OUT/harness-section.txt"
log "harness section: $(wc -l < "$OUT/harness-section.txt") lines, longest $(awk '{ if (length > m) m = length } END { print m }' "$OUT/harness-section.txt") chars"
log "pytest line: $(tail -1 "$OUT/sanitize.log")"
log "harness line: $(grep -m1 'as pytest counts them' "$OUT/sanitize.log")"
log "summary.md line 1: $(head -1 "$OUT/sanitize/summary.md" 2>/dev/null)"
log "modes: $(stat -c '%a %n' "$OUT"/sanitize/* 2>/dev/null | tr '\n' ' ')"

# 2. loader, schema, the same file twice
.venv/bin/python -m gpu_memsafety merge "$OUT/sanitize/report.json" -o "$OUT/merged" > "$OUT/merge.log" 2>&1
log "merge rc=$? (expect 0)"
.venv/bin/python - "$OUT/sanitize/report.json" > "$OUT/schema.log" 2>&1 <<'EOF'
import json, sys
try:
    import jsonschema
except ImportError:
    print("jsonschema not installed here: schema check skipped (the loader checked every field)")
    sys.exit(0)
jsonschema.validate(json.load(open(sys.argv[1])), json.load(open("docs/report.schema.json")))
print("report.json matches docs/report.schema.json")
EOF
log "schema: $(tail -1 "$OUT/schema.log")"
ln -f "$OUT/sanitize/report.json" "$OUT/hardlink.json"
.venv/bin/python -m gpu_memsafety merge "$OUT/sanitize/report.json" "$OUT/hardlink.json" -o "$OUT/merged-twice" > "$OUT/merge-twice.log" 2>&1
log "merge of one file twice rc=$? (expect 2): $(tail -1 "$OUT/merge-twice.log")"

# 3. an interrupted run (SIGTERM to pytest, as a cancelled CI job sends it)
left=$(( 520 - ($(date +%s) - T_START) ))
if [ "$left" -gt 100 ]; then
  .venv/bin/python -m pytest scenarios -p no:cacheprovider -rfEs --gpu-memsafety-mode both --gpu-memsafety-report-dir "$OUT/interrupted" \
      > "$OUT/interrupted.log" 2>&1 &
  pid=$!
  sleep 40; kill -TERM "$pid"; wait "$pid"; rc=$?
  log "interrupted run rc=$rc (expect non-zero)"
  log "interrupted summary.md line 1: $(head -1 "$OUT/interrupted/summary.md" 2>/dev/null)"
  log "never started listed: $(grep -c '^- ' "$OUT/interrupted/summary.md" 2>/dev/null)"
  .venv/bin/python -c "import json,sys; d=json.load(open(sys.argv[1])); print(d['run']['id'], d['summary'], len(d.get('not_run', [])))" \
      "$OUT/interrupted/report.json" >> "$OUT/steps.txt" 2>&1
else
  log "interrupted run skipped: $left s left"
fi
log "total wall_s=$(( $(date +%s) - T_START ))"
