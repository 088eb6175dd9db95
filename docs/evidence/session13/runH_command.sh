#!/usr/bin/env bash
# Session 13 device command H (H100): per-kernel GPU time (ncu) of one ESM-2 650M training step
# with the fused GELU GEMMs, for the next session's planning (as session 12's run N).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
timeout 280 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model esm2 --shape 650M \
  --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 1 --warmup 1 > $OUT/ncu_esm2_650M.csv 2> /tmp/ncu1.log
echo "esm2 ncu rc $?"; python3 tools/ncu_summary.py $OUT/ncu_esm2_650M.csv > $OUT/ncu_esm2_650M_summary.txt 2>&1; head -30 $OUT/ncu_esm2_650M_summary.txt; gzip -f $OUT/ncu_esm2_650M.csv
