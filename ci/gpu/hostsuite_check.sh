#!/usr/bin/env bash
# Issue 25 on the H200: `pytest --gpu-memsafety[=MODE]` on test suites, one call (about 7 minutes):
#   calib   our calibration suite (ci/gpu/hostsuite/calib/): plain, markers, memcheck, pages. What it must show:
#           test_store_one_past_the_end: a finding in markers and memcheck mode, 4 B written past the end of
#           `alloc 4000 B at test_calib.py line ...` (+4000..+4004), the test itself passing; test_read_one_past_the_end:
#           markers clean (a read), memcheck 4 B read past x's end; test_known_off_by_one: expected finding in both;
#           test_memory_stats_break / test_cudnn_benchmark_break: not applicable (pytorch#133281 / #98481), their own
#           result `passed` from a run without the guard allocator; test_graph_capture_break: not applicable
#           (pytorch#163257); test_cpu_only: not applicable (nothing to guard); test_clean_fill: clean.
#   tk      triton_kernels' own tests, the version of the vendored copy A (triton-lang/triton d4399a15, see
#           ci/gpu/hostsuite_prepare.sh), nothing of ours in them: a subset (SUBSET, below) plain, markers and
#           memcheck, with wall times (timing.txt), tests collected / run / not applicable (reasons) / findings.
#   k2880   the K=2880 mxfp4 case a user's conftest.py adds to test_matmul.py::test_op (ci/gpu/hostsuite/
#           conftest_k2880.py, no upstream file edited), non-persistent, no gather/scatter: plain (passes: the bug is
#           silent), markers (a read: markers do not see it), memcheck: an overread of `alloc 92160 B` (the Hopper
#           scale), 64 B past its end, as scenario last_expert_oob_read reports (results/h200/run3-last-expert.md).
# Carry [".vendor"] holding .vendor/sgl-kernel-0.3.21/triton_kernels (copy A) and
# .vendor/triton-kernels-tests-d4399a15/tests (put there by ci/gpu/hostsuite_prepare.sh).
# Everything under $OUT: summary.txt (every case, finding, message), steps.txt, env.txt, timing.txt, counts.txt,
# reports.tgz (report.json, junit.xml, summary.md and the pytest log of every step). Each step logs and goes on.
#   overhead  test_mxfp.py's 9 quant/dequant tests under memcheck in one sanitized child, then one child per test.
#   warm      (PART=warm only) the routing/mxfp/swiglu/compaction tests (WARM_SUBSET) plain and under markers, REPS
#             times each (default 2), alternating, after a cold pass of both: markers' overhead with Triton's cache
#             warm; then calib plain and pages, pages twice into one report folder.
#   BUDGET=430 (s for the whole call; steps run in this order until it is spent: calib markers and memcheck,
#   k2880, tk, overhead, calib plain and pages); PART=all|calib|tk|k2880|overhead|warm|pages
set -u
set -o pipefail
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_PROGRESS=plain
REPO=$PWD; source "$REPO/ci/gpu/runenv.sh"
whole BUDGET 430 0 86400; whole REPS 2 0 1000
OUT=${OUT:-/tmp/out}; fresh_run_folder hostsuite-r; mkdir -p "$OUT"
BUDGET_S=$BUDGET; T_START=$(date +%s); LOGS="$R"; PART=${PART:-all}
export GPU_MEMSAFETY_CACHE="$REPO/.cache/build"
source "$(dirname "$0")/steps.sh"
TK="$REPO/.vendor/sgl-kernel-0.3.21"; TESTS="$REPO/.vendor/triton-kernels-tests-d4399a15/tests"
SUITE=$R/tk; CAL=$R/calib; PY="$REPO/.venv/bin/python"
# The tk subset (121 of 3,631 tests collected on a CPU: the whole test_op grid is 3,320 cases, hours): routing (56),
# mxfp conversions (24), swiglu (2), compaction (4), and test_matmul's test_op on its 16x256x256 and 300x400x400
# cases, non-persistent, block_m 16, no gammas, gather or scatter (35, many skipped on Hopper by the suite itself).
SUBSET=${SUBSET:-"tests/test_routing.py tests/test_mxfp.py tests/test_swiglu.py tests/test_compaction.py tests/test_matmul.py"}
SUBSET_K=${SUBSET_K:-"not test_matmul.py or (test_op and False-False-False-False-False-16- and (16-256-256 or 300-400-400))"}

{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  which compute-sanitizer nvcc; ls "$TK/triton_kernels" | head -3; sha256sum "$TESTS"/*.py
} > "$R/env.txt" 2>&1
step bootstrap 150 make .venv/.bootstrap-gpu
"$PY" -c "import gpu_memsafety, sys; print('gpu_memsafety from', gpu_memsafety.__file__, sys.version)" >> "$R/env.txt" 2>&1
rm -rf "$SUITE"; mkdir -p "$SUITE"; cp -r "$TESTS" "$SUITE/tests"; cp ci/gpu/hostsuite/conftest_k2880.py "$SUITE/conftest.py"
rm -rf "$CAL"; cp -r ci/gpu/hostsuite/calib "$CAL"
export PYTHONPATH="$TK${PYTHONPATH:+:$PYTHONPATH}"

# hs NAME LIMIT DIR ARGS...: pytest in DIR (its own rootdir), its log and (with --gpu-memsafety) reports in $R/NAME.
# (a script, not a function: `timeout` runs programs)
printf '#!/usr/bin/env bash\nname=$1; dir=$2; shift 2\ncd "$dir" && exec %s -m pytest -p no:cacheprovider -rfEs -o junit_family=xunit2 --junitxml "%s/$name.junit.xml" "$@"\n' "$PY" "$R" > /tmp/hsrun.sh
chmod +x /tmp/hsrun.sh
hs() { local name=$1 limit=$2 dir=$3; shift 3; step "$name" "$limit" /tmp/hsrun.sh "$name" "$dir" "$@"; }
guarded() { local name=$1 limit=$2 dir=$3 mode=$4; shift 4
  hs "$name" "$limit" "$dir" "--gpu-memsafety=$mode" --gpu-memsafety-report-dir "$R/$name" "$@"; }

if [ "$PART" = all ] || [ "$PART" = calib ]; then     # (builds the shim: the first markers run pays for it)
  guarded calib-markers 100 "$CAL" markers test_calib.py
  guarded calib-memcheck 120 "$CAL" memcheck test_calib.py --gpu-memsafety-batch 8 --gpu-memsafety-timeout 100
fi
if [ "$PART" = all ] || [ "$PART" = k2880 ]; then
  # The user's case: its node ids, non-persistent without gather/scatter/gammas (the scenario's routed matmul).
  (cd "$SUITE" && "$PY" -m pytest -p no:cacheprovider --collect-only -q tests/test_matmul.py -k "2880 and 4-2-1-1-True" \
     2>&1 | grep '::test_op\[False-False-False-False-False-' > "$R/k2880.ids"); head -3 "$R/k2880.ids"
  K=$(head -2 "$R/k2880.ids" | tr '\n' ' ')
  if [ -n "$K" ]; then
    hs k2880-plain 90 "$SUITE" $K
    guarded k2880-markers 90 "$SUITE" markers $K
    guarded k2880-memcheck 150 "$SUITE" memcheck $K --gpu-memsafety-timeout 130
  else echo "[k2880] no K=2880 node id collected: see k2880.ids" | tee -a "$R/steps.txt"; fi
fi
if [ "$PART" = all ] || [ "$PART" = tk ]; then
  (cd "$SUITE" && "$PY" -m pytest -p no:cacheprovider --collect-only -q $SUBSET -k "$SUBSET_K" 2>&1 | tail -1) > "$R/tk.collected"
  hs tk-plain 120 "$SUITE" $SUBSET -k "$SUBSET_K"                 # cold: fills Triton's kernel cache
  guarded tk-markers 150 "$SUITE" markers $SUBSET -k "$SUBSET_K"
  hs tk-plain-warm 90 "$SUITE" $SUBSET -k "$SUBSET_K"             # warm, as tk-markers ran: the fair baseline
  guarded tk-memcheck 150 "$SUITE" memcheck tests/test_mxfp.py tests/test_swiglu.py tests/test_compaction.py \
    --gpu-memsafety-batch 64 --gpu-memsafety-timeout 130
fi

if [ "$PART" = all ] || [ "$PART" = overhead ]; then  # memcheck batched vs one sanitized process per test
  guarded over-memcheck-batch 90 "$SUITE" memcheck tests/test_mxfp.py -k quant_dequant --gpu-memsafety-timeout 80
  guarded over-memcheck-per-test 150 "$SUITE" memcheck tests/test_mxfp.py -k quant_dequant --gpu-memsafety-batch 1 \
    --gpu-memsafety-timeout 60
fi
if [ "$PART" = pages ]; then   # pages mode alone on the calibration suite (the shim's build included)
  guarded calib-pages 90 "$CAL" pages test_calib.py -k "store_one_past_the_end or clean_fill or read_one_past" --gpu-memsafety-timeout 80
fi
if [ "$PART" = warm ]; then   # markers' overhead with Triton's cache warm on both sides (runs 22 and 25 were cold)
  W=${WARM_SUBSET:-"tests/test_routing.py tests/test_mxfp.py tests/test_swiglu.py tests/test_compaction.py"}
  hs warm-plain-cold 150 "$SUITE" $W                               # fills Triton's cache (not timed against)
  guarded warm-markers-cold 150 "$SUITE" markers $W                # the shim's build, and any kernel left
  for k in $(seq 1 "$REPS"); do
    hs "warm-plain-$k" 90 "$SUITE" $W
    guarded "warm-markers-$k" 90 "$SUITE" markers $W
  done
fi
if [ "$PART" = all ] || [ "$PART" = calib ] || [ "$PART" = warm ]; then     # what is left of the budget
  hs calib-plain 60 "$CAL" test_calib.py
  guarded calib-pages 90 "$CAL" pages test_calib.py -k "store_one_past_the_end or clean_fill" --gpu-memsafety-timeout 80
  # again into the same report folder: pytest then counts that folder when it picks the rootdir (the children must
  # be given the parent's; before 24bc765 they collected nothing and every test was `crashed`)
  guarded calib-pages-again 90 "$CAL" pages test_calib.py -k "store_one_past_the_end or clean_fill" --gpu-memsafety-timeout 80 \
    --gpu-memsafety-report-dir "$R/calib-pages"
fi

"$PY" ci/gpu/summarize.py "$R" > "$R/summary.txt" 2>&1
{ for f in "$R"/*.log; do n=$(basename "$f" .log); echo "$n: $(grep -E '^[0-9]+ (passed|failed)|^=+ .* in [0-9.]+s' "$f" | tail -1)"; done
  grep "wall_s" "$R/steps.txt"; cat "$R/tk.collected" 2>/dev/null; } > "$R/timing.txt" 2>&1
"$PY" - "$R" > "$R/counts.txt" 2>&1 <<'PY'
import json, sys
from collections import Counter
from pathlib import Path
for report in sorted(Path(sys.argv[1]).glob("*/report.json")):
    doc = json.loads(report.read_text())
    cases = doc["cases"]
    own = Counter(c["details"].get("test", {}).get("outcome", "?") for c in cases)
    reasons = Counter(c["message"].split(";")[0][:120] for c in cases if c["outcome"] == "not applicable")
    print(f"== {report.parent.name}: {len(cases)} tests; verdicts {dict(Counter(c['outcome'] for c in cases))}; "
          f"own {dict(own)}; findings {sum(len(c['findings']) for c in cases)}")
    for why, n in reasons.most_common(8):
        print(f"   not applicable x{n}: {why}")
PY
cat "$R/steps.txt" "$R/timing.txt" "$R/counts.txt"; grep -E "^==|memcheck|guard " "$R/summary.txt" | head -60
cp "$R/summary.txt" "$R/steps.txt" "$R/env.txt" "$R/timing.txt" "$R/counts.txt" "$OUT/"
tar czf "$OUT/reports.tgz" --exclude='*.xml.tmp' --exclude='tk/tests' --exclude='calib/__pycache__' -C "$R" . 2>/dev/null
ls -la "$OUT"
