#!/usr/bin/env bash
# Session 20 device command C (H100), the final binaries: the CUDA suite (recipe curves minus
# the long TrainingCurve cases; range timer test included), and ESM-2 650M FP8 with the per-range
# table (steps 10-13).
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
grep -E "CudaRangeTimer" /tmp/cuda_tests.log | tail -2 >> $S
D=.carry/data
timeout 100 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
  --steps 20 --warmup 8 --fp8 profiler.start_step=10 profiler.end_step=13 profiler.range_times=true \
  --json $OUT/esm650_fp8_timed.json > /tmp/esm650_fp8.log 2>&1
echo "esm650 fp8 rc $?" >> $S
cat /tmp/esm650_fp8.log >> $S
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
