#!/usr/bin/env bash
# Session 27 device command G (one H200): the table's figures not yet measured on an H200, with
# adfb359's binary (the final commit's CUDA code): ESM-2 150M bf16, ESM-2 650M FP8 current
# scaling, Llama 1B bf16 and FP8 current scaling at the recipe batch (2 windows x 4 micro batches).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm_prev.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 100 build/biofm bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //' | cut -c1-110)" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
}
E="--data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm_150M_bf16 --model esm2 --shape 150M $E
B esm_650M_fp8_current --model esm2 --shape 650M $E --fp8
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 16384 --max-seq-length 8192 --grad-acc 4 --steps 6 --warmup 2"
B llama_1B_recipe_bf16 $L
B llama_1B_recipe_fp8_current $L --fp8
tar czf $OUT/runG_logs.tgz -C /tmp $(cd /tmp && ls esm_*.json llama_*.json esm_*.log llama_*.log)
cat $S
