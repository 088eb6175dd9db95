#!/usr/bin/env bash
# Session 27 device command F (one H200): where the ESM-2 650M FP8 DelayedScaling step goes now
# (adfb359's binary, whose CUDA code is the final commit's): ncu kernel times of one warm-up and
# one timed step, summarized by tools/ncu_summary.py, as session 22's run H did on the H100.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm_prev.xz > build/biofm && chmod +x build/biofm
export OMP_NUM_THREADS=16 LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader; command -v ncu; } > $S 2>&1
timeout 420 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model esm2 --shape 650M \
  --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 1 --warmup 1 --fp8 \
  fp8_config.fp8_recipe=DelayedScaling > /tmp/ncu_esm2_650M_fp8_delayed.csv 2> /tmp/ncu.log
echo "ncu rc $?" >> $S; tail -3 /tmp/ncu.log >> $S
python3 tools/ncu_summary.py /tmp/ncu_esm2_650M_fp8_delayed.csv > $OUT/ncu_esm2_650M_fp8_delayed_summary.txt 2>&1
head -40 $OUT/ncu_esm2_650M_fp8_delayed_summary.txt >> $S
gzip -c /tmp/ncu_esm2_650M_fp8_delayed.csv > $OUT/ncu_esm2_650M_fp8_delayed.csv.gz
cat $S
