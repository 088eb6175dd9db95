#!/usr/bin/env bash
# Session 10 device command E: the CUDA suite (TrainingCurve* left out) after the data changes, and
# streamed ESM-2 / Llama training on the GPU.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt; git log -1 --format=%h > $S; nvidia-smi --query-gpu=name --format=csv,noheader >> $S
d=$(mktemp -d)
( build/biofm train --config-dir configs --config-name esm2_sanity device=cuda num_train_steps=30 dataset.path=data/proteins_sample.fasta \
    dataset.streaming=true dataset.shuffle_buffer=500 output_dir=$d/e logger.tensorboard=false checkpoint.save_every_n_steps=10 > $d/e.log 2>&1; echo "esm2 streamed rc $?" >> $d/e.log
  build/biofm train --config-dir configs --config-name llama3_sanity device=cuda num_train_steps=20 dataset.path=data/dna_sample.fasta \
    dataset.streaming=true dataset.shuffle_buffer=200 output_dir=$d/l logger.tensorboard=false > $d/l.log 2>&1; echo "llama streamed rc $?" >> $d/l.log ) &
OMP_NUM_THREADS=4 timeout ${T:-420} build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' > $d/t.log 2>&1; echo "cuda tests rc $?" >> $S
wait
{ grep -E '^\[  (PASSED|FAILED) |^\[==========\]|FAILED  \]' $d/t.log | tail -12
  for f in e l; do grep -E 'biofm train|data |step +(1|10|20|30)/|rc |error' $d/$f.log | cut -c1-220 | tail -8; done; } >> $S
cat $S
