#!/usr/bin/env bash
# Session 23 device command I (H100): the final binaries (the review mends on top of 758d324): the
# whole CUDA suite without the long CPU-curve tests, then ESM-2 650M FP8 DelayedScaling, FP8
# current scaling and bf16 once each.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED|NormCodes" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 75 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 \
    --steps 16 --warmup 6 "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
B esm_fp8_delayed --fp8 fp8_config.fp8_recipe=DelayedScaling
B esm_fp8_current --fp8
B esm_bf16
tail -c 60000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
