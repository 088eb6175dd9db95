#!/usr/bin/env bash
# Session 32 device command D (one H200): 6ffb8c8, the final code (the review's two AdamW-ahead
# fixes: a streamed checkpoint load drops an owed update; bench settles it at both ends of the timed
# window). The optimizer, checkpoint and side-stream CUDA suites, then ESM-2 650M FP8
# DelayedScaling (the issue-12 command) with --warmup 8 and with --warmup 0.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; echo "code 6ffb8c8"; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
timeout 150 build/tests/biofm_cuda_tests --gtest_filter='CudaAdamWAhead.*:CudaSideStream.*:CudaOptim*:*Checkpoint*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|adamw ahead\]" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 30000 /tmp/cuda_tests.log > /tmp/runD_cuda_tests_tail.log
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 75 build/biofm bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during|AdamW" /tmp/$name.log | cut -c1-120 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --fp8 fp8_config.fp8_recipe=DelayedScaling"
B esm_fp8_delayed $E --warmup 8
B esm_fp8_delayed_nowarmup $E --warmup 0
cd /tmp && tar czf $OUT/runD_logs.tgz runD_cuda_tests_tail.log esm_*.json esm_*.log
cat $S
