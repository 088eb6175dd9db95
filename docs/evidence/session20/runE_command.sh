#!/usr/bin/env bash
# Session 20 device command E (H100): as D, after the CUDA test fix (take before switching the timer off); range_timer (pooled events, steps
# only): its CUDA test, and `biofm train` of ESM-2 650M for 12 steps with validation every 2 steps
# inside the window (steps 5-8) - validation must not appear among the step's ranges.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaRangeTimer*:CudaCore*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
D=.carry/data
timeout 200 build/biofm train --config-name esm2_t33_650M dataset.path=$D/uniprot_20k.fasta.gz \
  dataset.val_path=$D/uniprot_20k.fasta.gz dataset.val_every_n_steps=2 dataset.val_max_batches=2 \
  num_train_steps=12 logger.frequency=4 checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false \
  checkpoint.resume_from_checkpoint=false output_dir=/tmp/rt profiler.start_step=5 profiler.end_step=8 \
  profiler.range_times=true > /tmp/train_rt.log 2>&1
echo "train rc $?" >> $S
sed -n '/range times/,/optimizer/p' /tmp/train_rt.log >> $S
grep -E "^step|val" /tmp/train_rt.log | tail -4 >> $S
cp /tmp/rt/range_times_rank0.json $OUT/ 2>/dev/null
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
