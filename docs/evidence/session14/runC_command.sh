#!/usr/bin/env bash
# Session 14 device command C (H100): packed q|k|v attention (rope in place, cuDNN strided) on top
# of run B's changes: CUDA suite; ESM-2 650M / 150M and Llama 1B end to end; embed vs HF.
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
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -80 >> $S
gzip $OUT/cuda_tests.log
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do B esm650_$r $E; done
B esm650_fp8 $E --fp8
B esm150 --model esm2 --shape 150M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
B llama1b $L
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -6 $OUT/embed_vs_hf.txt >> $S
zcat .carry/data/uniprot_20k.fasta.gz > /tmp/all.fasta
build/biofm embed --model /tmp/e/esm2_650M --input /tmp/all.fasta --output /tmp/oe20k --device cuda > /tmp/emb.log 2>&1
echo "embed 20000 rc $? $(grep -o '[0-9]* records in .*' /tmp/emb.log)" >> $S
cat $S
