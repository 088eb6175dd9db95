#!/usr/bin/env bash
# Session 11 device command E: the CUDA suite after merging optimizer-state offload and the
# native Float8BlockScaling path (the two long CPU-reference curve tests left out: TEST_FILTER).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout ${TEST_SECS:-540} build/tests/biofm_cuda_tests --gtest_filter="${TEST_FILTER:--*TrainingCurve*}" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|tests ran" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -80 >> $S
grep -E "^\[       OK \] CudaOptimizerOffload|^\[  FAILED  \] CudaOptimizerOffload" $OUT/cuda_tests.log >> $S
gzip -f $OUT/cuda_tests.log
cat $S
