#!/usr/bin/env bash
# Session 24 device command G (H100): ops.wgrad_stream on and off, alternating, for the shapes run
# B/C did not cover: ESM-2 150M (smaller GEMMs, fewer tiles), ESM-2 650M FP8 DelayedScaling once
# more, and Llama 1B bf16 at the recipe batch (2 windows x 4 micro batches).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=16
S=$OUT/summary.txt
date -u > $S
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 90 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-90 | sed 's/^/    /' >> $S
}
E150="--model esm2 --shape 150M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm150_on_1 $E150
B esm150_off_1 $E150 ops.wgrad_stream=false
B esm150_on_2 $E150
B esm150_off_2 $E150 ops.wgrad_stream=false
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6 --fp8 fp8_config.fp8_recipe=DelayedScaling"
B esm_fp8_off_3 $E ops.wgrad_stream=false
B esm_fp8_on_3 $E
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
B llama_recipe_on $L
B llama_recipe_off $L ops.wgrad_stream=false
cat $S
