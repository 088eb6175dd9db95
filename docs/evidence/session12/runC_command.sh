#!/usr/bin/env bash
# Session 12 device command C: dense cuDNN SDPA backward (transposed statistics); attention tests;
# attention bench; Llama 1B bench with ops.sdpa_dense on and off (bf16 and FP8, 1 window and 2 x 4).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaAttention*:CudaModels*Llama*:*Llama*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|tests ran" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -40 >> $S
cp .carry/pack/attention_bench /tmp/ab && chmod +x /tmp/ab && /tmp/ab 20 cudnn 2>&1 | grep -E "llama|og2|esm2-650M|unavailable" > $OUT/attention_bench.txt; cat $OUT/attention_bench.txt >> $S
B() { local tag=$1; shift; build/biofm bench "$@" --json $OUT/$tag.json > $OUT/$tag.log 2>&1; echo "$tag rc $? $(tail -1 $OUT/$tag.log)" >> $S; }
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --steps 20 --warmup 5"
for d in true false; do
  B llama1b_bf16_1w_dense_$d $L --tokens-per-batch 8192 ops.sdpa_dense=$d
done
for d in true false; do
  B llama1b_bf16_2x4_dense_$d $L --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2 ops.sdpa_dense=$d
  B llama1b_fp8_2x4_dense_$d $L --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2 --fp8 ops.sdpa_dense=$d
done
cat $S
