#!/usr/bin/env bash
# Session 12 device command L: compute-sanitizer memcheck of the dense attention path (the new
# statistics-transpose kernel and the dense cuDNN graphs).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
timeout 400 $CS --tool memcheck --error-exitcode 99 build/tests/biofm_cuda_tests \
  --gtest_filter='CudaAttention.UniformBatchesRunDenseCudnnGraphs:CudaAttention.BrokenUniformPromiseIsAnError' > $OUT/memcheck.log 2>&1
echo "memcheck rc $?" > $OUT/summary.txt
grep -E "ERROR SUMMARY|^\[  (PASSED|FAILED)|OK \]" $OUT/memcheck.log >> $OUT/summary.txt
cat $OUT/summary.txt
