#!/usr/bin/env bash
# Session 24 device command E (H100): the whole CUDA suite (the long CPU-curve tests excluded) on
# the side-stream binaries (c3e7a1b + the test fix).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=16
S=$OUT/summary.txt
timeout 420 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" > $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED|\[side stream\]" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 30000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
