#!/usr/bin/env bash
# Session 29 device command G (one H200): bench/fp8_gelu_pipeline_probe.cu round 3 (a copy of the library kernel with switches), linked against
# 50607b4's library: which of the library kernel's differences from the fastest variant costs
# the 7-13 us per call of run F.
set -u
mkdir -p $OUT
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
xz -dc .carry/pack/fp8_gelu_pipeline_probe.xz > /tmp/probe && chmod +x /tmp/probe
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader
  timeout 150 /tmp/probe 50; echo "probe rc $?"; } > $OUT/probe.txt 2>&1
sed -n '/^arithmetic variants/,$p' $OUT/probe.txt > $S
tail -3 $OUT/probe.txt >> $S
cat $S
