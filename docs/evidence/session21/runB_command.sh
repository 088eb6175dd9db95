#!/usr/bin/env bash
# Session 21 device command B (H100): the FP8 GELU epilogues with a warp-level amax (one atomic
# per warp, not per thread). CUDA suite without the long CPU-curve tests; ESM-2 650M FP8 current
# scaling fused on / off alternating twice (the second pair with range times), DelayedScaling on / off.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 230 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 80 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
    --steps 16 --warmup 6 --fp8 "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
B cur_on_1 ops.gemm_fused_gelu=true
B cur_off_1 ops.gemm_fused_gelu=false
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B cur_on_2 ops.gemm_fused_gelu=true $W
grep -E "mlp|attention forward|attention backward|train_step" /tmp/cur_on_2.log | head -12 | sed 's/^/    /' >> $S
B cur_off_2 ops.gemm_fused_gelu=false $W
grep -E "mlp|attention forward|attention backward|train_step" /tmp/cur_off_2.log | head -12 | sed 's/^/    /' >> $S
B delayed_on fp8_config.fp8_recipe=DelayedScaling ops.gemm_fused_gelu=true
B delayed_off fp8_config.fp8_recipe=DelayedScaling ops.gemm_fused_gelu=false
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
