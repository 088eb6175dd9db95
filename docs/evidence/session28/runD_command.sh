#!/usr/bin/env bash
# Session 28 device command D (one H200): fp8_dequantize with 8 codes per thread (no index
# arithmetic): the backend-ops table and the FP8 attention tests, then the OpenGenome2 7B shape
# (DelayedScaling, recompute) with and without fp8_dpa and the per-range timer, as in run C.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
timeout 150 build/tests/biofm_cuda_tests --gtest_filter='CudaAttentionFp8*:CudaBackendOps*:CudaFp8*' > /tmp/fa8_tests.log 2>&1
echo "tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|^forward:|^backward" /tmp/fa8_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/fa8_tests.log | head -40 >> $S
B() {  # name, extra args...
  local name=$1; shift
  timeout 140 build/biofm bench "$@" output_dir=/tmp/rt_$name --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during|note: fp8_dpa|error" /tmp/$name.log | cut -c1-160 | sed 's/^/    /' >> $S
  grep -E "sdpa" /tmp/$name.log | head -4 | sed 's/^/    /' >> $S
}
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 7B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 8192 --recompute --steps 12 --warmup 4 --fp8 fp8_config.fp8_recipe=DelayedScaling profiler.range_times=true profiler.start_step=6 profiler.end_step=10"
B og2_7b_delayed_dpa_d $L fp8_config.fp8_recipe_kwargs.fp8_dpa=true
B og2_7b_delayed_d $L
tail -c 20000 /tmp/fa8_tests.log > /tmp/fa8_tests_tail.log
tar czf $OUT/runD_logs.tgz -C /tmp fa8_tests_tail.log $(cd /tmp && ls og2_*.json og2_*.log 2>/dev/null)
cat $S
