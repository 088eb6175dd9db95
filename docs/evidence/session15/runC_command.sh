#!/usr/bin/env bash
# Session 15 device command C (H100): FP8 producer fusions (GELU forward/backward amax, norm
# backward dx amax, bias gradient from the quantization pass): full CUDA suite, then ESM-2 650M
# FP8 (and Llama 1B FP8) alternating the new binary against 07876f6; bf16 650M as a check.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_07876f6.xz > /tmp/biofm_prev && chmod +x /tmp/biofm_prev
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 280 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
B() { local tag=$1 bin=$2; shift 2; $bin bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
for r in 1 2; do
  B esm650_fp8_new_$r build/biofm $E --fp8; B esm650_fp8_prev_$r /tmp/biofm_prev $E --fp8
done
B esm650_bf16_new build/biofm $E
B llama1b_fp8_new build/biofm $L --fp8; B llama1b_fp8_prev /tmp/biofm_prev $L --fp8
cat $S
