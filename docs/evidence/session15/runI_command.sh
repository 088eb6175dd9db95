#!/usr/bin/env bash
# Session 15 device command I (H100): bench/gemm_algos_bench.cpp with the weight-gradient split-K
# probes (cuBLASLt's SPLITK_NUM on its candidates; two K halves batched).
set -u
mkdir -p $OUT
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
timeout 300 .carry/pack/gemm_algos_bench 16 20 > $OUT/gemm_algos_bench.txt 2>&1; echo "rc $?" >> $S
cat $OUT/gemm_algos_bench.txt >> $S; cat $S
