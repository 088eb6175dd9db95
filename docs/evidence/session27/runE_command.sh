#!/usr/bin/env bash
# Session 27 device command E (one H200): bench/rope_fp8_bench.cpp against the c728bf6 library
# (v1: 16 scalar table loads per thread, double sincos inlined for positions past the table; 78
# registers) and the reworked kernel (v3: eight values at a time, 16-byte table loads, the past-
# table path out of line; 64 registers), alternating.
set -u
mkdir -p build $OUT
for v in rope_fp8_bench rope_fp8_bench_v3; do xz -dc .carry/pack/$v.xz > build/$v && chmod +x build/$v; done
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader
  for i in 1 2; do for v in rope_fp8_bench rope_fp8_bench_v3; do echo "== $v"; timeout 60 build/$v 100 | grep -E "rope|:"; done; done; } > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
