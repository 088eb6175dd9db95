#!/usr/bin/env bash
# Session 21 device command I (H100), after the re-read mends (one decode helper for codes in
# fp8_cuda.cu's fallbacks, the fp8_quantize_gelu call count after its checks): the FP8 and
# delayed-scaling tests, the backend-ops table, the ESM-2 CUDA tests.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 280 build/tests/biofm_cuda_tests --gtest_filter="CudaFp8*:BackendOps*:CudaEsm2*:CudaGemm*:-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
cat $S
