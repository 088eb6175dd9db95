#!/usr/bin/env bash
# Session 14 device command A (H100): norm kernels' chunks-per-thread choices and the bias-gradient
# routes on their own; cuBLASLt's first vs best algorithm per GEMM; the changed ops' CUDA tests;
# ESM-2 650M end to end, session 13's binary against this one, and ops.gemm_fused_bgrad=false.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_b950ea5.xz > /tmp/biofm_old && chmod +x /tmp/biofm_old
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/norm_bias_bench.xz > /tmp/nb && chmod +x /tmp/nb
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
timeout 120 /tmp/nb 30 > $OUT/norm_bias_bench.txt 2>&1; echo "norm_bias_bench rc $?" >> $S
timeout 120 .carry/pack/gemm_algos_bench 16 20 > $OUT/gemm_algos_bench.txt 2>&1; echo "gemm_algos_bench rc $?" >> $S
export OMP_NUM_THREADS=16
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaNorm.*:BackendOps.*:CudaGemm.*:CudaEsm2.*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
B() { local tag=$1 bin=$2; shift 2; $bin bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do B old_$r /tmp/biofm_old $E; B new_$r build/biofm $E; B new_colsum_$r build/biofm $E ops.gemm_fused_bgrad=false; done
cat $S
