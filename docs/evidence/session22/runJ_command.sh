#!/usr/bin/env bash
# Session 22 device command J (H100): fp8_amax_record with 16-byte loads (run I's ncu: the scalar
# loop ran at 0.3-0.65 TB/s). The CUDA tests of delayed scaling, FP8 and the backend ops; then
# ESM-2 650M FP8 DelayedScaling twice (with range times once).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaFp8Delayed.*:CudaFp8.*:BackendOps.*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|RecordMatches" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
for i in 1 2; do
  X=""; [ $i = 1 ] && X="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
  timeout 75 build/biofm bench --model esm2 --shape 650M --data .carry/data/uniprot_8k.fasta.gz --tokens-per-batch 16384 \
    --steps 16 --warmup 6 --fp8 fp8_config.fp8_recipe=DelayedScaling $X --json $OUT/esm_fp8_delayed_$i.json > /tmp/b$i.log 2>&1
  echo "esm_fp8_delayed_$i rc $? $(grep -E 'tok/s' /tmp/b$i.log | tail -1)" >> $S
  grep -E "GPU during|^  (train_step|forward|backward|optimizer) " /tmp/b$i.log >> $S
done
cat $S
