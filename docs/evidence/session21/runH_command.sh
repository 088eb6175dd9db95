#!/usr/bin/env bash
# Session 21 device command H (H100): the rest of run G's CUDA suite (G's 230 s limit stopped it
# inside CudaInfer with 86 passed, none failed): CudaInfer onwards, without the long CPU curves.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 280 build/tests/biofm_cuda_tests --gtest_filter="CudaInfer*:CudaL*:CudaM*:CudaN*:CudaO*:CudaP*:CudaR*:CudaS*:CudaT*:CudaU*:CudaEsm2*:CudaLlama*:-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
cat $S
