#!/usr/bin/env bash
# Session 23 device command A (H100): the CUDA suite on cdb8386 (the norm codes through the norm
# launcher, one |x| loop for amax and record; built but not run on the GPU in session 22),
# without the long CPU-curve tests; then bench/fp8_gelu_bench.cu (the GELU quantizations and
# copies of their kernel with other erf evaluations) and ncu's full set on the library kernels.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/fp8_gelu_bench.xz > build/fp8_gelu_bench && chmod +x build/fp8_gelu_bench
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 60 build/fp8_gelu_bench 50 > $OUT/fp8_gelu_bench.txt 2>&1; echo "fp8_gelu_bench rc $?" >> $S
cat $OUT/fp8_gelu_bench.txt >> $S
# every quantize kernel of one pass of the bench (each variant: 3 untimed calls and 1 timed; the
# table keeps them all), at ncu's locked clocks
timeout 150 ncu --set full --csv --page details -k regex:quantize_kernel -c 40 build/fp8_gelu_bench 1 \
  > $OUT/ncu_gelu_full.csv 2>$OUT/ncu_stderr.txt
echo "ncu rc $?" >> $S
python3 tools/ncu_metrics_table.py $OUT/ncu_gelu_full.csv >> $S 2>&1
timeout 330 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED|NormCodes" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 60000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
