#!/usr/bin/env bash
# Session 16 device command C (H100): the FP8 quantization kernel with two 64x64 tiles per block
# (more loads in flight per thread): CUDA suite; bench/fp8_quantize_bench (1 vs 2 tiles);
# ESM-2 650M FP8 and bf16 alternating against 37e23ce (one tile per block).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_37e23ce.xz > /tmp/biofm_prev && chmod +x /tmp/biofm_prev
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/fp8_quantize_bench.xz > /tmp/fp8_quantize_bench && chmod +x /tmp/fp8_quantize_bench
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}  # Gloo and its libraries (not on the GPU machine)
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
/tmp/fp8_quantize_bench 50 > $OUT/fp8_quantize_bench.txt 2>&1; echo "quantize bench rc $?" >> $S
cat $OUT/fp8_quantize_bench.txt >> $S
B() { local tag=$1 bin=$2; shift 2; $bin bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do
  B esm650_fp8_new_$r build/biofm $E --fp8; B esm650_fp8_prev_$r /tmp/biofm_prev $E --fp8
done
B esm650_bf16_new build/biofm $E
gzip $OUT/bench_logs.txt
cat $S
