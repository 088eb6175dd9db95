#!/usr/bin/env bash
# Session 27 device command D (one H200): bench/rope_fp8_bench.cpp (built on the CPU machine
# against the c728bf6 library): the q|k|v gradient's inverse rotation inside its quantization
# against the rope kernel then the quantization, and the plain quantization, at the ESM-2 650M
# and Llama 1B shapes; twice.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/rope_fp8_bench.xz > build/rope_fp8_bench && chmod +x build/rope_fp8_bench
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader
  timeout 60 build/rope_fp8_bench 100; echo "rc $?"; timeout 60 build/rope_fp8_bench 100; echo "rc $?"; } > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
