#!/usr/bin/env bash
# Session 24 device command H (H100): the review's fixes. The side-stream tests on a test binary
# with the reviewed bug put back (frees deferred only from enter(): must fail) and on the fixed
# one (must pass); then ESM-2 650M bf16 and FP8 DelayedScaling with the side stream on and off.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
for b in biofm_cuda_tests biofm_cuda_tests_bug; do xz -dc .carry/pack/$b.xz > build/tests/$b && chmod +x build/tests/$b; done
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=16
S=$OUT/summary.txt
date -u > $S
for b in biofm_cuda_tests_bug biofm_cuda_tests; do
  timeout 150 build/tests/$b --gtest_filter="CudaSideStream.*" > /tmp/$b.log 2>&1
  echo "$b: CudaSideStream.* rc $?" >> $S
  grep -E "^\[  PASSED|^\[  FAILED|\[side stream\]" /tmp/$b.log >> $S
  grep -A4 "Failure" /tmp/$b.log | head -24 >> $S
  tail -c 20000 /tmp/$b.log > $OUT/$b.log
done
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 80 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-90 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6"
B esm_bf16_on $E
B esm_bf16_off $E ops.wgrad_stream=false
B esm_fp8_on $E --fp8 fp8_config.fp8_recipe=DelayedScaling
B esm_fp8_off $E --fp8 fp8_config.fp8_recipe=DelayedScaling ops.wgrad_stream=false
cat $S
