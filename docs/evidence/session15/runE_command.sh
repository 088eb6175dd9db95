#!/usr/bin/env bash
# Session 15 device command E (H100): the fused GELU GEMMs' persistent tile order (swizzle x
# raster) at the ESM-2 650M MLP shape against cuBLASLt's plain GEMM (bench/mlp_gelu_bench.cpp),
# then ncu of one ESM-2 650M FP8 step with this session's FP8 fusions.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/mlp_gelu_bench.xz > /tmp/mgb && chmod +x /tmp/mgb
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
timeout 200 /tmp/mgb 50 > $OUT/mlp_gelu_bench.txt 2>&1; echo "mlp_gelu_bench rc $?" >> $S
cat $OUT/mlp_gelu_bench.txt >> $S
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384"
timeout 250 ncu --metrics gpu__time_duration.sum --csv \
  build/biofm bench $E --steps 1 --warmup 1 --fp8 > /tmp/ncu_fp8.csv 2>/tmp/ncu_fp8.err
echo "ncu rc $?" >> $S
python3 tools/ncu_summary.py /tmp/ncu_fp8.csv --top 30 > $OUT/ncu_fp8_summary.txt 2>&1; gzip -c /tmp/ncu_fp8.csv > $OUT/ncu_fp8.csv.gz
head -40 $OUT/ncu_fp8_summary.txt >> $S
cat $S
