#!/usr/bin/env bash
# Session 12 device command M: after the review fixes — the CUDA attention and inference tests,
# memcheck of the dense attention tests (incl. dense forward + ragged backward and the reverse).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaAttention*:CudaInfer*:*Embed*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|tests ran" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -40 >> $S
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 300 $CS --tool memcheck --error-exitcode 99 build/tests/biofm_cuda_tests \
  --gtest_filter='CudaAttention.UniformBatchesRunDenseCudnnGraphs:CudaAttention.BrokenUniformPromiseIsAnError' > $OUT/memcheck.log 2>&1
echo "memcheck rc $?" >> $S
grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED)" $OUT/memcheck.log >> $S
cat $S
