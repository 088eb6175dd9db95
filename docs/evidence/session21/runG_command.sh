#!/usr/bin/env bash
# Session 21 device command G (H100), the final binaries (after the review fixes: argument checks
# of the Fp8Codes paths, the MLP's alignment precondition, comments): the CUDA suite without the
# long CPU-curve tests (the backend-ops table has the new fp8_quantize_gelu rows; CudaFp8Delayed
# has the bit-for-bit and training tests); then ESM-2 650M FP8 DelayedScaling with
# ops.fp8_gelu_codes on / off alternating twice (the second pair with range times), and current
# scaling for reference.
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
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED|GeluCodes" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 80 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
    --steps 16 --warmup 6 --fp8 "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
R="fp8_config.fp8_recipe=DelayedScaling"
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B delayed_codes_1 $R ops.fp8_gelu_codes=true
B delayed_kernels_1 $R ops.fp8_gelu_codes=false
B delayed_codes_2 $R ops.fp8_gelu_codes=true $W
grep -E "mlp forward|mlp backward|train_step" /tmp/delayed_codes_2.log | head -3 | sed 's/^/    /' >> $S
B delayed_kernels_2 $R ops.fp8_gelu_codes=false $W
grep -E "mlp forward|mlp backward|train_step" /tmp/delayed_kernels_2.log | head -3 | sed 's/^/    /' >> $S
B current
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
