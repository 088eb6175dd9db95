#!/usr/bin/env bash
# Session 23 device command J (H100), after the re-read's mends (one erf definition for the CPU
# reference and the CUDA GELU, erf_rational.h; one warp-to-history-slot fold for the record kernel
# and the quantization's record): the CUDA tests of the activation, FP8, delayed-scaling, GEMM,
# norm and ESM-2 suites and the backend ops; ESM-2 650M FP8 DelayedScaling once.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 300 build/tests/biofm_cuda_tests \
  --gtest_filter="CudaActivation.*:BackendOps.*:CudaFp8Delayed.*:CudaFp8.*:CudaGemm.*:CudaEsm2.*:CudaNorm.*:-*TrainingCurve*" \
  > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
timeout 75 build/biofm bench --model esm2 --shape 650M --data .carry/data/uniprot_8k.fasta.gz --tokens-per-batch 16384 \
  --steps 16 --warmup 6 --fp8 fp8_config.fp8_recipe=DelayedScaling --json $OUT/esm_fp8_delayed.json > /tmp/b.log 2>&1
echo "esm_fp8_delayed rc $? $(grep -E 'tok/s' /tmp/b.log | tail -1)" >> $S
grep -E "GPU during" /tmp/b.log >> $S
tail -c 40000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
