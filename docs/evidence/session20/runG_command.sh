#!/usr/bin/env bash
# Session 20 device command G (H100), the final binaries: the CUDA suite (minus the long
# TrainingCurve cases) and `biofm report` of a GPU run with range_times (the HTML's table).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 330 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
D=.carry/data
timeout 150 build/biofm train --config-name esm2_t33_650M dataset.path=$D/uniprot_20k.fasta.gz num_train_steps=10 \
  logger.frequency=5 checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false \
  checkpoint.resume_from_checkpoint=false output_dir=/tmp/rg profiler.start_step=5 profiler.end_step=8 \
  profiler.range_times=true > /tmp/train_rg.log 2>&1
echo "train rc $?" >> $S
build/biofm report /tmp/rg --output $OUT/report.html >> $S 2>&1
echo "report rc $?" >> $S
grep -c "<table class=\"ranges\">" $OUT/report.html >> $S
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
