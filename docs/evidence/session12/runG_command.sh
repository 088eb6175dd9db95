#!/usr/bin/env bash
# Session 12 device command G: cuDNN SDPA engine autotuning on the ESM-2 shapes (attention bench).
set -u
mkdir -p $OUT
cp .carry/pack/attention_bench /tmp/ab && chmod +x /tmp/ab
/tmp/ab 30 cudnn autotune > $OUT/attention_bench_autotune.txt 2>&1; echo "rc $?" >> $OUT/attention_bench_autotune.txt
grep -v "^llama\|^og2" $OUT/attention_bench_autotune.txt
