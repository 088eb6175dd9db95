#!/usr/bin/env bash
# Session 23 device command G (H100): the GELU quantization takes whole tiles without bounds
# checks (run F's ncu: the library kernel 195 / 289 us against its copy's 164 / 231 us). The GELU
# bench with the copies; the CUDA tests of FP8, delayed scaling and the backend ops; ESM-2 650M
# FP8 DelayedScaling with 44a2011 (before this change) and now, alternating.
set -u
mkdir -p build/tests $OUT
for b in biofm biofm_prev fp8_gelu_bench_var; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 40 build/fp8_gelu_bench_var 50 >> $S 2>&1
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaFp8Delayed.*:CudaFp8.*:BackendOps.*:-*TrainingCurve*" \
  > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 75 build/$bin bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
  grep -E "  (train_step|forward|backward|mlp forward|mlp backward) " /tmp/$name.log | head -5 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6"
R="--fp8 fp8_config.fp8_recipe=DelayedScaling"
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B esm_fp8_new_1 biofm $E $R $W
B esm_fp8_prev_1 biofm_prev $E $R $W
B esm_fp8_new_2 biofm $E $R
B esm_fp8_prev_2 biofm_prev $E $R
tail -c 40000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
