#!/usr/bin/env bash
# Session 12 device command O: ncu of one Llama 1B step on a full 8192-token window (dense
# attention graphs): the lambda phage genome alone, whose first windows are full.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
zcat .carry/data/lambda_phage.fa.gz > /tmp/lambda.fasta
timeout 250 ncu --metrics gpu__time_duration.sum --csv build/biofm bench --model llama --shape 1B \
  --data /tmp/lambda.fasta --tokens-per-batch 8192 --max-seq-length 8192 --steps 1 --warmup 1 > $OUT/ncu_llama_1B_8k_dense.csv 2> /tmp/ncu.log
echo "llama ncu rc $?"; gzip -f $OUT/ncu_llama_1B_8k_dense.csv; tail -2 /tmp/ncu.log
