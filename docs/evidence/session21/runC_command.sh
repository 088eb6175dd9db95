#!/usr/bin/env bash
# Session 21 device command C (H100), an experiment: five CUTLASS configurations of the FP8 GELU
# GEMMs (BIOFM_FP8_GELU_CFG: 0 ping-pong 128x128x128, 1 cooperative 128x128x128, 2 cooperative
# 256x128x128, 3 ping-pong 64x128x128, 4 cooperative 128x128x128 cluster 2x1), ESM-2 650M FP8
# current scaling with range times; the unfused pair last for reference.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
D=.carry/data
W="profiler.start_step=8 profiler.end_step=11 profiler.range_times=true"
B() {  # name, extra args...
  local name=$1; shift
  timeout 80 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
    --steps 14 --warmup 5 --fp8 $W "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //')" >> $S
  grep -E "mlp forward|mlp backward" /tmp/$name.log | head -2 | sed 's/^/    /' >> $S
}
for c in 0 1 2 3 4; do BIOFM_FP8_GELU_CFG=$c B cfg$c ops.gemm_fused_gelu=true; done
B unfused ops.gemm_fused_gelu=false
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
