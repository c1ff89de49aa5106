#!/usr/bin/env bash
# Issue 17 on a machine with two H200s (device kind nvidia-h200-x2), one call, under 9 minutes, all under $OUT.
# Carry .vendor (triton_kernels from `make triton-kernels`): the device cannot download it.
#   1. `make bench` part scaling: a warm-up pass over the default matrix (guard mode, both GPUs: fills the
#      Triton and CUDA-extension caches), then the default matrix (mode both) on 1 GPU and on 2 GPUs, then as
#      2 shards at once (one GPU each) merged, against the 2-GPU run. bench.json "scaling" holds the wall
#      times, the speedup, whether the outcomes agree, and per run the batch start-up / case / exit seconds.
#   2. guard markers on the smallest gpt-oss shapes (TP-4 down, padded and unpadded, 20b and 120b) and the
#      64 MiB verification: bare vs kernel + check-and-rearm (one folded launch), and the same check replayed
#      from a CUDA graph; GPU time (CUPTI) and elapsed (CUDA events). Warm, since step 1 compiled everything.
# Wall times come from `date +%s` (no bc on the device). Each step has its own limit inside the budget.
set -uf   # -f: the case ids below hold brackets, never globs
export PYTHONUNBUFFERED=1 GPU_MEMSAFETY_CACHE="$PWD/.cache/build"
OUT=${OUT:-/tmp/out}; rm -rf -- "$OUT/r"; mkdir -p "$OUT/r"     # this call's own
BUDGET_S=530; T_START=$(date +%s)
LOGS="$OUT/r"; STEP_TAIL=4
source "$(dirname "$0")/steps.sh"
{ nvidia-smi -L; python3 -m gpu_memsafety env; } > "$OUT/r/env.txt" 2>&1
step bootstrap 60 make .venv/.bootstrap-gpu
# The matrix measured: run 7's default matrix (152 cases: planted_oob, padded_stride_scale_write on our CUDA and
# Triton kernels, last_expert_oob_read on triton_kernels copy A), which fits one call. The default matrix has
# since grown to ~330 cases (sglang copies, triton_kernels copies C and D, the vLLM pad); its 1-GPU run alone
# would take ~8 minutes here. SCALING_SELECT="" measures all of it (give the call ~20 minutes).
SCALING_SELECT=${SCALING_SELECT-"--gpu-memsafety-scenario planted_oob --gpu-memsafety-scenario padded_stride_scale_write --gpu-memsafety-scenario last_expert_oob_read -k 'not tkC and not tkD and not sglang and not vllm'"}
# ~400 s expected: warm-up ~60, 1 GPU ~170-220, 2 GPUs ~90-115, shards ~90-115. The shards are skipped (and say
# so) if the first three took more than 360 s, so that step 2 still runs.
step scaling 440 .venv/bin/python -m gpu_memsafety bench --out "$OUT/r/bench-scaling" --parts scaling --scaling-budget-s 360 \
  --scaling-args "$SCALING_SELECT"
SMALL="--gpu-memsafety-case last_expert_oob_read[padded-tkA-gptoss20b-down-tp4-K768-E32-N2880]
       --gpu-memsafety-case last_expert_oob_read[padded-tkA-gptoss120b-down-tp4-K768-E128-N2880]
       --gpu-memsafety-case last_expert_oob_read[unpadded-tkA-gptoss20b-down-tp4-K768-E32-N2880]
       --gpu-memsafety-case last_expert_oob_read[unpadded-tkA-gptoss120b-down-tp4-K768-E128-N2880]"
# shellcheck disable=SC2086
step guard-small 90 .venv/bin/python -m gpu_memsafety bench --out "$OUT/r/bench-guard" --parts bandwidth,cases \
  --sizes-mib 64,256 --reps 40 --case-modes "" $SMALL
# What the two bench runs say, in a few lines (the full tables are in each bench.md).
.venv/bin/python - "$OUT/r" > "$OUT/r/summary.txt" 2>&1 <<'EOF'
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
for name in ("bench-scaling", "bench-guard"):
    path = root / name / "bench.json"
    if not path.exists():
        print(f"== {name}: no bench.json"); continue
    doc = json.loads(path.read_text())
    print(f"== {name}")
    for t in doc.get("targets", []):
        if t["status"] != "not measured":
            print(f"  {t['status']:>7}  {t['target']}: {t['measured']:.3f} (goal {t['goal']})")
    sc = doc["parts"].get("scaling") or {}
    for key in ("warmup", "one", "all"):
        r = sc.get(key) or {}
        if r:
            print(f"  {key}: {r['wall_s']:.1f} s, exit {r['exit_code']}, {r.get('cases')} cases, {r.get('batches')} batches, "
                  f"{r.get('processes')} processes: start-up {r.get('startup_s')} s, cases {r.get('cases_s')} s, "
                  f"exit {r.get('exit_s')} s, slowest batch {r.get('slowest_batch_s')} s")
    if sc.get("one"):
        print(f"  speedup {sc.get('speedup')}, same outcomes {sc.get('same_outcomes')}")
        sh = sc.get("shards") or {}
        print(f"  shards: {sh.get('wall_s')} s, vs one run {sh.get('vs_one_run')}, same outcomes {sh.get('same_outcomes')}, "
              f"{sh.get('message', '')}")
    for s in (doc["parts"].get("bandwidth") or {}).get("sizes", []):
        print(f"  {s['size_mib']} MiB: check/copy {s['check_vs_copy']:.2f}, graph/copy {s.get('check_graph_vs_copy', 0):.2f}")
    for r in (doc["parts"].get("cases") or {}).get("cases", []):
        q = r.get("ratios", {})
        print(f"  {r['case_id']}: spans {r.get('marker_spans')}, GPU time {q.get('guard_launch_gpu')} "
              f"(graph {q.get('guard_launch_graph_gpu')}), elapsed {q.get('guard_launch')} (graph {q.get('guard_launch_graph')})")
EOF
cat "$OUT/r/summary.txt"
cp "$OUT/r/bench-scaling/bench.json" "$OUT/r/bench-scaling.json" 2>/dev/null
cp "$OUT/r/bench-scaling/bench.md" "$OUT/r/bench-scaling.md" 2>/dev/null
tar czf "$OUT/reports.tgz" -C "$OUT" r 2>/dev/null
echo "total wall_s=$(( $(date +%s) - T_START ))" | tee -a "$OUT/r/steps.txt"
