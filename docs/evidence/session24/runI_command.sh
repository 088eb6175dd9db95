#!/usr/bin/env bash
# Session 24 device command I (H100): the final binaries. The side-stream tests on a test binary
# with the reviewed bug put back (must fail: BlocksFreedAfterTheMarkAreNotHandedToTheSideWork)
# and the CUDA tests of the side stream, core, GEMMs, FP8 and models on the fixed one; then ESM-2
# 650M bf16 (two pairs, alternating order) and FP8 DelayedScaling with the side stream on and off.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
for b in biofm_cuda_tests biofm_cuda_tests_bug; do xz -dc .carry/pack/$b.xz > build/tests/$b && chmod +x build/tests/$b; done
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=16
S=$OUT/summary.txt
date -u > $S
timeout 100 build/tests/biofm_cuda_tests_bug --gtest_filter="CudaSideStream.*" > /tmp/bug.log 2>&1
echo "bug binary: CudaSideStream.* rc $?" >> $S
grep -E "^\[  PASSED|^\[  FAILED|^\[       OK" /tmp/bug.log >> $S
grep -A3 "Failure" /tmp/bug.log | head -12 >> $S
timeout 200 build/tests/biofm_cuda_tests \
  --gtest_filter="CudaSideStream.*:CudaCore.*:CudaGemm.*:CudaFp8.*:CudaFp8Delayed.*:CudaEsm2*:CudaLlama*:CudaModels*:-*TrainingCurve*" \
  > /tmp/cuda_tests.log 2>&1
echo "fixed binary: cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|\[side stream\]" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -40 >> $S
tail -c 20000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 80 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-90 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6"
B esm_bf16_on_1 $E
B esm_bf16_off_1 $E ops.wgrad_stream=false
B esm_bf16_off_2 $E ops.wgrad_stream=false
B esm_bf16_on_2 $E
B esm_fp8_on $E --fp8 fp8_config.fp8_recipe=DelayedScaling
B esm_fp8_off $E --fp8 fp8_config.fp8_recipe=DelayedScaling ops.wgrad_stream=false
cat $S
