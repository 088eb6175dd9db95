#!/usr/bin/env bash
# Session 28 device command B (one H200): the whole CUDA suite at the commit with the 16-call
# amax history for FP8 attention's gradients (includes the FP8 attention tests and their
# head-dim-128 training curve beside the delayed-only one), then the OpenGenome2 7B shape (one
# 8192-token window per step, recompute, FP8 DelayedScaling) with and without fp8_dpa.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
timeout 300 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|^forward:|^backward|\[llama hd128" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
B() {  # name, extra args...
  local name=$1; shift
  timeout 130 build/biofm bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during|note: fp8_dpa|error" /tmp/$name.log | cut -c1-160 | sed 's/^/    /' >> $S
}
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 7B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 8192 --recompute --steps 12 --warmup 4 --fp8 fp8_config.fp8_recipe=DelayedScaling"
B og2_7b_fp8_2 $L
B og2_7b_fp8_dpa_2 $L fp8_config.fp8_recipe_kwargs.fp8_dpa=true
tail -c 30000 /tmp/cuda_tests.log > /tmp/cuda_tests_tail.log
tar czf $OUT/runB_logs.tgz -C /tmp cuda_tests_tail.log $(cd /tmp && ls og2_*.json og2_*.log 2>/dev/null)
cat $S
