#!/usr/bin/env bash
# Session 11 device command C: native Float8BlockScaling (cuBLASLt VEC128) — CUDA tests, then
# ESM-2 650M and Llama 1B benches: bf16, FP8 current scaling, Float8BlockScaling.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
timeout ${TEST_SECS:-300} build/tests/biofm_cuda_tests --gtest_filter="${TESTS:-CudaBlockScale.*}" > $OUT/cuda_tests.log 2>&1
echo "tests rc $?" >> $S
grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|^\[       OK|Float8BlockScaling\]|emulated" $OUT/cuda_tests.log >> $S
B() { local tag=$1; shift; build/biofm bench "$@" --json $OUT/$tag.json > $OUT/$tag.log 2>&1; echo "$tag rc $? $(grep -i 'emulated' $OUT/$tag.log | head -2) $(tail -1 $OUT/$tag.log)" >> $S; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
L="--model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 8192 --max-seq-length 8192 --steps 20 --warmup 5"
B esm650_fp8_block $E --fp8 fp8_config.fp8_recipe=Float8BlockScaling
B llama1b_fp8_block $L --fp8 fp8_config.fp8_recipe=Float8BlockScaling

cat $S
