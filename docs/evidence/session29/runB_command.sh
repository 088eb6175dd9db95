#!/usr/bin/env bash
# Session 29 device command B (one H200): the probe of run A (bench/fp8_gelu_pipeline_probe.cu)
# with the arithmetic variants added (run A's ncu: the GELU quantizations are bound by issue
# slots, not DRAM): NaN-propagating min/max clamps, codes two at a time, fused multiply-adds,
# __expf; each compared with the library kernel's bytes, then timed alternating with it.
set -u
mkdir -p $OUT
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
xz -dc .carry/pack/fp8_gelu_pipeline_probe.xz > /tmp/probe && chmod +x /tmp/probe
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader
  timeout 120 /tmp/probe 50; echo "probe rc $?"; } > $S 2>&1
cat $S
