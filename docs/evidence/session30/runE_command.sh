#!/usr/bin/env bash
# Session 30 device command E (one H200): the whole CUDA suite on 48b30d9 (the session's final code: a resume with another amax_history_len,
# the config check across ranks, the FP8 overflow statistic, the layer lists checked at load, ...),
# then one ESM-2 650M FP8 DelayedScaling bench as a sanity figure.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
timeout 330 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 30000 /tmp/cuda_tests.log > $OUT/runE_cuda_tests_tail.log
timeout 80 build/biofm bench --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 --fp8 fp8_config.fp8_recipe=DelayedScaling --json $OUT/esm_fp8d.json > $OUT/esm_fp8d.log 2>&1
echo "bench rc $? $(grep -E 'tok/s' $OUT/esm_fp8d.log | tail -1)" >> $S
grep -E "GPU during" $OUT/esm_fp8d.log | cut -c1-100 >> $S
cat $S
