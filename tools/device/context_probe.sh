#!/usr/bin/env bash
# Issue 26 item 4 on the H200: does a process go on after memcheck ended one of its kernels
# (--destroy-on-device-error kernel)? tools/device/context_probe.py under compute-sanitizer, output in $OUT/probe.txt.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
{ echo "compute-sanitizer: $CS"; "$CS" --version | tail -1
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 120 "$CS" --tool memcheck --destroy-on-device-error kernel --print-limit 3 \
      python3 tools/device/context_probe.py
  echo "exit=$?"
} > "$OUT/probe.txt" 2>&1
cat "$OUT/probe.txt"
