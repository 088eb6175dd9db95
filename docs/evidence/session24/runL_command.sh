#!/usr/bin/env bash
# Session 24 device command L (H100): the final biofm binary: ESM-2 650M bf16 with the side stream
# (the bench's new line says so), then Llama 1B bf16 one window (its config turns it off).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=16
D=.carry/data
timeout 80 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6 --json $OUT/esm_bf16.json 2>&1 | grep -E "bench:|second CUDA stream|tok/s|GPU during" | cut -c1-160
zcat $D/lambda_phage.fa.gz > /tmp/dna.fasta
timeout 60 build/biofm bench --model llama --shape 1B --data /tmp/dna.fasta --max-seq-length 8192 --tokens-per-batch 8192 --steps 6 --warmup 2 --json $OUT/llama_bf16.json 2>&1 | grep -E "bench:|second CUDA stream|tok/s" | cut -c1-160
