#!/usr/bin/env bash
# Session 13 device command G (H100): after the review fixes (sm_90a guard, partial-tile and
# fallback tests, model-level fused-vs-unfused test): CUDA suite; ESM-2 650M bench once.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -80 >> $S
grep -E "FusedGelu|GeluFusion|gelu" $OUT/cuda_tests.log | head -40 >> $S
gzip $OUT/cuda_tests.log
build/biofm bench --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 > /tmp/b.log 2>&1; echo "esm650 rc $? $(tail -1 /tmp/b.log)" >> $S
cat $S
