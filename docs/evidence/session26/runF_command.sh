#!/usr/bin/env bash
# Session 26 device command F (one H200): binaries of 47085c2 (the last commit but the empty-
# wandb-section fix, which touches no GPU code). The side-stream, core and ESM-2/Llama-vs-HF CUDA tests; then esm2_sanity trained
# on the GPU from a recipe-style command line (use_sequence_packing, adamw_kwargs.lr,
# wandb_init_args.*, profiler.enabled): the notes it prints and its loss.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm_new.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=8
S=$OUT/summary.txt
date -u > $S
timeout 150 build/tests/biofm_cuda_tests --gtest_filter='CudaSideStream.*:CudaCore.*:CudaEsm2.*:CudaLlama.*' > /tmp/t.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/t.log >> $S
grep -B3 -A12 "Failure" /tmp/t.log | head -30 >> $S
timeout 120 build/biofm train --config-name esm2_sanity device=cuda num_train_steps=40 output_dir=/tmp/r \
  use_sequence_packing=true adamw_kwargs.lr=4e-4 wandb_init_args.project=esm2 profiler.enabled=true > /tmp/r.log 2>&1
echo "train rc $?" >> $S
grep -E "^note|^biofm train|^done|step +40" /tmp/r.log >> $S
cat $S
