#!/usr/bin/env bash
# Session 12 device command E: ESM-2 650M against the HF peer with whole-model torch.compile
# (dynamic shapes) and length-grouped batches, same command, same GPU, same data.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $OUT/summary.txt
bench/run_peer_comparison.sh build/biofm --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz \
  --skip-eager --hf-args "--compile-dynamic" --out /tmp/peer > $OUT/peer_table.txt 2>&1
echo "peer rc $?" >> $OUT/summary.txt
cp /tmp/peer/ours.json $OUT/ 2>/dev/null; cp /tmp/peer/hf_compile.json $OUT/ 2>/dev/null
cp /tmp/peer/hf_compile.log $OUT/ 2>/dev/null
tail -15 $OUT/peer_table.txt >> $OUT/summary.txt
cat $OUT/summary.txt
