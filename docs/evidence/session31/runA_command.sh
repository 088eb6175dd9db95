#!/usr/bin/env bash
# Session 31 device command A (one H200): the FP8 weight codes one layer ahead on the side stream
# (ops.fp8_weights_ahead). Its CUDA tests and the side-stream / FP8 suites, then ESM-2 650M FP8
# (DelayedScaling, the issue-12 command; and current scaling) and Llama 1B FP8 at the recipe batch
# with the option on and off, alternating in this one command.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
timeout 150 build/tests/biofm_cuda_tests --gtest_filter='CudaSideStream.*:CudaFp8*:CudaDelayed*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|side stream\]" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 30000 /tmp/cuda_tests.log > $OUT/runA_cuda_tests_tail.log
D=.carry/data
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B() {  # name, extra args...
  local name=$1; shift
  timeout 75 build/biofm bench "$@" --json $OUT/$name.json > $OUT/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' $OUT/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" $OUT/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 --fp8"
for i in 1 2; do
  B esm_delayed_ahead_$i $E fp8_config.fp8_recipe=DelayedScaling
  B esm_delayed_inline_$i $E fp8_config.fp8_recipe=DelayedScaling ops.fp8_weights_ahead=false
done
B esm_current_ahead $E
B esm_current_inline $E ops.fp8_weights_ahead=false
L="--model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 16384 --max-seq-length 8192 --grad-acc 4 --steps 6 --warmup 2 --fp8"
B llama_current_ahead $L
B llama_current_inline $L ops.fp8_weights_ahead=false
cat $S
