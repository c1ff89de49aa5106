#!/usr/bin/env bash
# Where one case's time goes, in its worker process: `repro --keep` runs the case once (its job.json kept), then
# the same job runs again in-process under cProfile (no sanitizer: modes without one only). Output: $OUT/profile.txt
# (the top functions by cumulative and by own time). CASES="scenario[label] ..." MODE=poison (the default).
set -u
source "$(dirname "$0")/runenv.sh"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"; fresh_run_folder profile-keep; K=$R
MODE=${MODE:-poison}; PY=${PY:-$PWD/.venv/bin/python}
for CASE in ${CASES:?set CASES}; do rm -rf "$K"
{ echo "== $CASE in mode $MODE"; date -u
  "$PY" -m gpu_memsafety repro "$CASE" --mode "$MODE" --keep "$K" 2>&1 | tail -5
  JOB=$(ls "$K"/*/batch-*/job.json | head -1); D=$(dirname "$JOB"); rm -f "$D"/0.json "$D"/0.started
  "$PY" - "$JOB" <<'PY'
import json, sys
p = sys.argv[1]; j = json.load(open(p)); j["out_dir"] = p.rsplit("/", 1)[0]; json.dump(j, open(p, "w"))
PY
  ( cd "$D" && export TRITON_INTERPRET=${TRITON_INTERPRET:-} && time "$PY" -m cProfile -o "$K/prof.out" -m gpu_memsafety.engine.worker job.json ) 2>&1 | tail -4
  "$PY" -c "
import pstats
p = pstats.Stats('$K/prof.out'); p.sort_stats('cumulative').print_stats(r'gpu_memsafety|harness|kernels', 45)
p.sort_stats('tottime').print_stats(30)" 2>&1 | grep -v '^$' | cut -c1-220
  "$PY" -c "import json; r = json.load(open('$D/0.json')); print('profiled run:', r.get('status'), r.get('seconds'), r.get('message', ''))"
} >> "$OUT/profile.txt" 2>&1
done
