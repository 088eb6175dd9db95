#!/usr/bin/env bash
# Session 24 device command C (H100): the weight gradients on a side stream (ops.wgrad_stream).
# The CUDA tests of the side stream, GEMMs, FP8, models; then (the memory it holds now bounded: the compute stream waits for side work 4 scopes back) ESM-2 650M bf16 and FP8
# DelayedScaling and Llama 1B bf16 with the side stream on and off, alternating, with range times.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 200 build/tests/biofm_cuda_tests \
  --gtest_filter="CudaSideStream.*:CudaCore.*" \
  > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|\[side stream\]" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 80 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-90 | sed 's/^/    /' >> $S
  grep -E "  (train_step|forward|backward|optimizer) " /tmp/$name.log | head -4 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6"
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B esm_bf16_on_1 $E $W
B esm_bf16_off_1 $E $W ops.wgrad_stream=false
B esm_bf16_on_2 $E
B esm_bf16_off_2 $E ops.wgrad_stream=false
R="--fp8 fp8_config.fp8_recipe=DelayedScaling"
B esm_fp8_on_1 $E $R
B esm_fp8_off_1 $E $R ops.wgrad_stream=false
B esm_fp8_on_2 $E $R
B esm_fp8_off_2 $E $R ops.wgrad_stream=false
B esm_fp8cur_on $E --fp8
B esm_fp8cur_off $E --fp8 ops.wgrad_stream=false
tail -c 40000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
