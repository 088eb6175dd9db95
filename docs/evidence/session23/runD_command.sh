#!/usr/bin/env bash
# Session 23 device command D (H100): the GELU quantization folds its amax per block (one atomic
# per block) and every CUDA GELU evaluates erf by the CPU reference's rational approximation.
# bench/fp8_gelu_bench.cpp; the CUDA tests of the ops and models a GELU or an amax touches;
# ESM-2 650M FP8 DelayedScaling and bf16 with cdb8386 (before the session) and now, alternating.
set -u
mkdir -p build/tests $OUT
for b in biofm biofm_old fp8_gelu_bench; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 60 build/fp8_gelu_bench 50 > $OUT/fp8_gelu_bench.txt 2>&1; echo "fp8_gelu_bench rc $?" >> $S; cat $OUT/fp8_gelu_bench.txt >> $S
timeout 230 build/tests/biofm_cuda_tests \
  --gtest_filter="CudaActivation.*:BackendOps.*:CudaFp8Delayed.*:CudaFp8.*:CudaGemm.*:CudaEsm2.*:CudaInfer.*:-*TrainingCurve*" \
  > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -80 >> $S
D=.carry/data
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 75 build/$bin bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6"
R="--fp8 fp8_config.fp8_recipe=DelayedScaling"
B esm_fp8_new_1 biofm $E $R
B esm_fp8_old_1 biofm_old $E $R
B esm_fp8_new_2 biofm $E $R
B esm_bf16_new biofm $E
B esm_bf16_old biofm_old $E
tail -c 40000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
