#!/usr/bin/env bash
# Session 27 device command H (one H200): bench/fp8_sdpa_probe.cpp (cuDNN 9.14 dense SDPA, BF16
# against FP8 E4M3, forward and backward) with ESM-2 650M's short bidirectional sequences added
# (40 x 416 tokens, 20 heads of 64, no mask: the dense stand-in for its ragged batches) beside the
# Llama / OG2 causal windows of session 12's probe.
set -u
mkdir -p $OUT
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm --format=csv,noheader
  timeout 200 .carry/pack/fp8_sdpa_probe 20; echo "rc $?"; } > $OUT/summary.txt 2>&1
cat $OUT/summary.txt
