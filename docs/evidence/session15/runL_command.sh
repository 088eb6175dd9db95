#!/usr/bin/env bash
# Session 15 device command L (H100): biofm embed of 4,000 proteins (bf16) with three binaries of
# this session, alternating, to find whether run K's slower embedding is the code or the machine.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_9c181ac.xz > /tmp/b_9c1 && chmod +x /tmp/b_9c1
xz -dc .carry/pack/biofm_89f185f.xz > /tmp/b_89f && chmod +x /tmp/b_89f
S=$OUT/summary.txt; { date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -5 $OUT/embed_vs_hf.txt >> $S
for r in 1 2; do
  for b in build/biofm /tmp/b_9c1 /tmp/b_89f; do
    $b embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --output /tmp/e/x.safetensors --device cuda --max-tokens 16384 --precision bf16 2>&1 | grep -o "records in .*" | sed "s|^|$b $r: |" >> $S
  done
done
cat $S
