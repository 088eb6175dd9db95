#!/usr/bin/env bash
# Session 15 device command F (H100): the fused GELU GEMMs with 128x192 ping-pong tiles against the
# 128x128 default (bench/mlp_gelu_bench.cpp); ESM-2 650M FP8 with the opt-in GEMM autotuning.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/mlp_gelu_bench.xz > /tmp/mgb && chmod +x /tmp/mgb
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
timeout 200 /tmp/mgb 50 > $OUT/mlp_gelu_bench.txt 2>&1; echo "mlp_gelu_bench rc $?" >> $S
sed -n '/tile order/,$p' $OUT/mlp_gelu_bench.txt >> $S
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm650_fp8_tune $E --fp8 ops.gemm_autotune=true
B esm650_fp8 $E --fp8
cat $S
