#!/usr/bin/env bash
# Session 13 device command A: fused GEMM+GELU (CUTLASS) microbench, CUDA suite, ESM-2 650M
# end to end with ops.gemm_fused_gelu on and off.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
xz -dc .carry/pack/mlp_gelu_bench.xz > /tmp/mb && chmod +x /tmp/mb && timeout 120 /tmp/mb 30 > $OUT/mlp_gelu_bench.txt 2>&1
echo "mlp_gelu_bench rc $?" >> $S; cat $OUT/mlp_gelu_bench.txt >> $S
export OMP_NUM_THREADS=16
timeout 150 build/tests/biofm_cuda_tests --gtest_filter='*Gemm*:*BackendOps*:*Activation*' > $OUT/cuda_tests_gemm.log 2>&1
echo "gemm/backend tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests_gemm.log >> $S
grep -B2 -A10 "Failure" $OUT/cuda_tests_gemm.log | head -50 >> $S
grep -E "gelu" $OUT/cuda_tests_gemm.log | head -30 >> $S
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
B esm650_fused $E
B esm650_unfused $E ops.gemm_fused_gelu=false
B esm650_fused2 $E
timeout 280 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*:*Gemm*:*BackendOps*:*Activation*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
cat $S
