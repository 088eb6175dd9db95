#!/usr/bin/env bash
# Session 12 device command I (one H200): the OpenGenome2 7B shape on one GPU with the dense
# attention graphs, as the session-3 runs: FP8 current scaling 1 window (recompute), bf16 2 x 2
# with 24 of 32 layers recomputed; dense on and off for the FP8 run.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; }
L="--model llama --shape 7B --data /tmp/dna_long.fasta --max-seq-length 8192 --recompute"
B og2_7b_fp8cur_1w_dense $L --tokens-per-batch 8192 --steps 10 --warmup 3 --fp8
B og2_7b_fp8cur_1w_ragged $L --tokens-per-batch 8192 --steps 10 --warmup 3 --fp8 ops.sdpa_dense=false
B og2_7b_bf16_2x2_rl24_dense $L --tokens-per-batch 16384 --grad-acc 2 --recompute-layers 24 --steps 3 --warmup 1
cat $S
