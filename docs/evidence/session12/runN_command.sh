#!/usr/bin/env bash
# Session 12 device command N: per-kernel GPU time (ncu) of one ESM-2 650M training step and one
# Llama 1B step (1 window, dense attention), for the next session's planning.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
timeout 280 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model esm2 --shape 650M \
  --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 1 --warmup 1 > $OUT/ncu_esm2_650M.csv 2> /tmp/ncu1.log
echo "esm2 ncu rc $?"; gzip -f $OUT/ncu_esm2_650M.csv
timeout 250 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model llama --shape 1B \
  --data /tmp/dna_long.fasta --tokens-per-batch 8192 --max-seq-length 8192 --steps 1 --warmup 1 > $OUT/ncu_llama_1B_8k.csv 2> /tmp/ncu2.log
echo "llama ncu rc $?"; gzip -f $OUT/ncu_llama_1B_8k.csv
