#!/usr/bin/env bash
# Session 15 device command K (H100): embedding 4,000 UniProt proteins, biofm against HF bf16
# (bench/embed_vs_hf.sh), with the final binary.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $OUT/summary.txt
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $OUT/summary.txt; tail -8 $OUT/embed_vs_hf.txt >> $OUT/summary.txt
cat $OUT/summary.txt
