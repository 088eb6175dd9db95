#!/usr/bin/env bash
# Session 22 device command H (H100): where the ESM-2 650M FP8 DelayedScaling step goes now
# (ncu kernel times of one warm-up and one timed step, summarized by tools/ncu_summary.py).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export OMP_NUM_THREADS=16 LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 330 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model esm2 --shape 650M \
  --data .carry/data/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 1 --warmup 1 --fp8 \
  fp8_config.fp8_recipe=DelayedScaling > $OUT/ncu_esm2_650M_fp8_delayed.csv 2> /tmp/ncu.log
echo "ncu rc $?"; tail -3 /tmp/ncu.log
python3 tools/ncu_summary.py $OUT/ncu_esm2_650M_fp8_delayed.csv > $OUT/ncu_esm2_650M_fp8_delayed_summary.txt 2>&1
head -40 $OUT/ncu_esm2_650M_fp8_delayed_summary.txt; gzip -f $OUT/ncu_esm2_650M_fp8_delayed.csv
