#!/usr/bin/env bash
# Session 14 device command H (H100): per-kernel GPU time (ncu) of one ESM-2 650M training step,
# bf16 and FP8 (current scaling), with this session's final binary, for the next session's planning.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
for v in bf16 fp8; do
  extra=""; [ $v = fp8 ] && extra="--fp8"
  timeout 250 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model esm2 --shape 650M \
    --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 1 --warmup 1 $extra > $OUT/ncu_esm2_650M_$v.csv 2> /tmp/ncu_$v.log
  echo "esm2 $v ncu rc $?"; python3 tools/ncu_summary.py $OUT/ncu_esm2_650M_$v.csv --top 30 > $OUT/ncu_esm2_650M_${v}_summary.txt 2>&1
  head -32 $OUT/ncu_esm2_650M_${v}_summary.txt; gzip -f $OUT/ncu_esm2_650M_$v.csv
done
