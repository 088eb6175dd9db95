#!/usr/bin/env bash
# Session 29 device command E (one H200): bench/fp8_gelu_pipeline_probe.cu round 2, linked against
# 3752082's library (its "library" rows are the new kernel): the library's tile bounds guard in a
# variant (what it costs), and the tile of codes XOR-swizzled by row group so the transposed
# store's byte reads stop colliding in one bank (4-way conflicts), for the GELU and the plain
# quantizations.
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
