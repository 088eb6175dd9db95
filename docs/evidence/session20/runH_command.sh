#!/usr/bin/env bash
# Session 20 device command H (H100), binaries of 32346df (ProfilerWindow::take_timed serves train
# and bench): the range-timer CUDA test, bench with range_times, train ending inside the window.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 100 build/tests/biofm_cuda_tests --gtest_filter="CudaRangeTimer*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S; grep -E "^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
D=.carry/data
timeout 100 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
  --steps 8 --warmup 4 profiler.start_step=6 profiler.end_step=8 profiler.range_times=true > /tmp/bench.log 2>&1
echo "bench rc $?" >> $S; grep -E "real tok/s|range times|train_step|sdpa" /tmp/bench.log >> $S
timeout 120 build/biofm train --config-name esm2_t33_650M dataset.path=$D/uniprot_20k.fasta.gz num_train_steps=6 \
  logger.frequency=3 checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false \
  checkpoint.resume_from_checkpoint=false output_dir=/tmp/rh profiler.start_step=5 profiler.end_step=9 \
  profiler.range_times=true > /tmp/train.log 2>&1
echo "train (window past the last step) rc $?" >> $S; grep -E "range times|train_step" /tmp/train.log >> $S
ls /tmp/rh/range_times_rank0.json >> $S 2>&1
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
