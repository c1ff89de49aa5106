#!/usr/bin/env bash
# bash ci/gpu/probes/shared_atomic.sh: compile and run shared_atomic.cu under memcheck, XML and text into $OUT
set -u; cd "$(dirname "$0")"; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvcc -lineinfo -arch=sm_90 -o /tmp/shared_atomic shared_atomic.cu > "$OUT/nvcc.txt" 2>&1 || { cat "$OUT/nvcc.txt"; exit 1; }
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
"$CS" --tool memcheck --xml --save "$OUT/shared_atomic.xml" --show-backtrace device /tmp/shared_atomic > "$OUT/run-xml.txt" 2>&1
"$CS" --tool memcheck --show-backtrace device /tmp/shared_atomic > "$OUT/shared_atomic.txt" 2>&1
head -c 3000 "$OUT/shared_atomic.txt"; echo; grep -n -A12 "<where>" "$OUT/shared_atomic.xml" | head -60
