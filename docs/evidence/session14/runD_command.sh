#!/usr/bin/env bash
# Session 14 device command D (H100): A/B in one command, alternating: packed q|k|v attention
# (ops.attention_packed_qkv) on/off for ESM-2 650M / 150M, Llama 1B and embed; GEMM autotune and
# the bias-gradient route at 150M; the changed tests.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaAttention.*:CudaEsm2.Matches*:CudaLlama*:BackendOps.*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -40 >> $S
gzip $OUT/cuda_tests.log
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
E150="--model esm2 --shape 150M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do
  B esm650_packed_$r $E; B esm650_unpacked_$r $E ops.attention_packed_qkv=false
  B esm150_packed_$r $E150; B esm150_unpacked_$r $E150 ops.attention_packed_qkv=false
done
B esm150_notune $E150 ops.gemm_autotune=false
B esm150_bgradb $E150 ops.gemm_fused_bgrad=true
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
for r in 1 2; do B llama1b_packed_$r $L; B llama1b_unpacked_$r $L ops.attention_packed_qkv=false; done
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -6 $OUT/embed_vs_hf.txt >> $S
for r in 1 2; do
  for o in attention_packed_qkv=true attention_packed_qkv=false; do
    build/biofm embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --output /tmp/oe.safetensors --device cuda --ops $o > /tmp/emb.log 2>&1
    echo "embed 4000 --ops $o rc $? $(grep -o '[0-9]* records in .*' /tmp/emb.log)" >> $S
  done
done
cat $S
