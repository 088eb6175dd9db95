#!/usr/bin/env bash
# Session 11 device command F: compute-sanitizer on this session's new CUDA code (block-scaled
# FP8 codes and layers, optimizer-state offload), then the two long curve tests left out of run E.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt; T=build/tests/biofm_cuda_tests
F='CudaBlockScale.BlockCodes*:CudaBlockScale.Native*:CudaBlockScale.Other*:CudaOptimizerOffload.*'
export OMP_NUM_THREADS=16
date -u > $S
( timeout 300 compute-sanitizer --tool memcheck --error-exitcode 99 $T --gtest_filter="$F" > $OUT/memcheck.log 2>&1; echo "memcheck rc $? $(grep -h 'ERROR SUMMARY' $OUT/memcheck.log) $(grep -c '^\[       OK' $OUT/memcheck.log) ok" >> $S ) &
( timeout 300 compute-sanitizer --tool racecheck --racecheck-report all --kernel-name kns=fp8_block_codes --error-exitcode 99 $T --gtest_filter='CudaBlockScale.BlockCodes*:CudaBlockScale.Native*' > $OUT/racecheck.log 2>&1; echo "racecheck rc $? $(grep -h 'RACECHECK SUMMARY' $OUT/racecheck.log) $(grep -c '^\[       OK' $OUT/racecheck.log) ok" >> $S ) &
( timeout 300 compute-sanitizer --tool initcheck --kernel-name kns=fp8_block_codes --error-exitcode 99 $T --gtest_filter='CudaBlockScale.BlockCodes*:CudaBlockScale.Native*' > $OUT/initcheck.log 2>&1; echo "initcheck rc $? $(grep -h 'ERROR SUMMARY' $OUT/initcheck.log) $(grep -c '^\[       OK' $OUT/initcheck.log) ok" >> $S ) &
( timeout 400 $T --gtest_filter='*TrainingCurve*' > $OUT/curves.log 2>&1; echo "curve tests rc $?" >> $S; grep -E "^\[       OK|^\[  FAILED|^\[  PASSED" $OUT/curves.log >> $S ) &
wait
for f in memcheck racecheck initcheck; do grep -m3 -A6 "^========= [A-Z][a-z]" $OUT/$f.log | grep -v "ERROR SUMMARY" | head -12 >> $S; done
cat $S
