#!/usr/bin/env bash
# Session 12 device command F: attention tests after the dense-graph changes; attention bench
# with batch-bucket cases (does rounding B up to a power of two cost time?).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaAttention*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|tests ran" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -40 >> $S
cp .carry/pack/attention_bench /tmp/ab && chmod +x /tmp/ab && /tmp/ab 30 cudnn 2>&1 | grep -v "^llama\|^og2" > $OUT/attention_bench.txt; cat $OUT/attention_bench.txt >> $S
cat $S
