#!/usr/bin/env bash
# Session 14 device command G (H100): ESM-2 650M against the strongest HF peer (whole-model
# torch.compile, dynamic shapes, length-grouped batches), same command, same GPU, same data; embed
# against HF bf16. Final binaries (as run F).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $OUT/summary.txt
timeout 420 bench/run_peer_comparison.sh build/biofm --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz \
  --skip-eager --hf-args "--compile-dynamic" --out /tmp/peer > $OUT/peer_table.txt 2>&1
echo "peer rc $?" >> $OUT/summary.txt
cp /tmp/peer/ours.json $OUT/ 2>/dev/null; cp /tmp/peer/hf_compile.json $OUT/ 2>/dev/null
tail -15 $OUT/peer_table.txt >> $OUT/summary.txt
timeout 150 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $OUT/summary.txt; tail -6 $OUT/embed_vs_hf.txt >> $OUT/summary.txt
cat $OUT/summary.txt
