#!/usr/bin/env bash
# Session 12 device command B: CUDA suite with dense cuDNN SDPA graphs for uniform batches;
# attention bench (dense vs ragged); PyTorch SDPA backends on the Llama 1B attention shape.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
cp .carry/pack/attention_bench /tmp/ab && chmod +x /tmp/ab && /tmp/ab 20 cudnn > $OUT/attention_bench.txt 2>&1; echo "attention_bench rc $?" >> $S
cat $OUT/attention_bench.txt >> $S
for c in "" "--causal"; do python3 bench/sdpa_backends_probe.py --b 1 --s 8192 --hq 32 --hkv 8 --d 64 $c >> $OUT/torch_sdpa.txt 2>&1; done
python3 bench/sdpa_backends_probe.py --b 1 --s 8192 --hq 32 --hkv 8 --d 128 --causal >> $OUT/torch_sdpa.txt 2>&1
cat $OUT/torch_sdpa.txt >> $S
export OMP_NUM_THREADS=16
timeout 330 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|tests ran" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
grep -E "UniformBatches|BrokenUniform|worst per-sequence" $OUT/cuda_tests.log | grep -E "OK|FAILED|256,256|384|1000" | head -20 >> $S
gzip -f $OUT/cuda_tests.log
cat $S
