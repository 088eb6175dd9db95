#!/usr/bin/env bash
# Session 13 run K (H100): CUDA suite on the final binaries (Tensor::borrowed / swap_grad_buffer
# and the nccl_symmetric option added since run G; the option itself needs two GPUs).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
build/biofm train --config-name esm2_sanity num_train_steps=20 device=cuda output_dir=/tmp/san distributed.nccl_symmetric=true > /tmp/san.log 2>&1; echo "one-process train with nccl_symmetric=true (no communicator) rc $? $(grep -o 'loss [0-9.]* -> [0-9.]*' /tmp/san.log)" >> $S
cat $S
