#!/usr/bin/env bash
# Session 15 device command A (H100): the binaries of 07876f6 (never run on a GPU): full CUDA
# suite, then ESM-2 650M / 150M / FP8 and Llama 1B with shipped defaults.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 280 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
E150="--model esm2 --shape 150M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm650_1 $E; B esm150_1 $E150; B esm650_fp8_1 $E --fp8
B esm650_2 $E; B esm150_2 $E150; B esm650_fp8_2 $E --fp8
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B llama1b --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2
cat $S
