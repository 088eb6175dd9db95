#!/usr/bin/env bash
# Session 8 device command C: after the norm-backward barrier fix, synccheck again; the CUDA suite
# without the 216 s CPU-reference curve test (which passed alone in command B's run... see notes).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( timeout 330 build/tests/biofm_cuda_tests --gtest_filter=-CudaEsm2.TrainingCurveMatchesCpu > $OUT/cuda_tests_C.txt 2>&1; echo "cuda tests exit $?" >> $OUT/cuda_tests_C.txt ) &
for f in 'CudaNorm.*' '-*Training*:*Curve*:*Throughput*:*Large*:*Stress*'; do
  timeout 200 $cs --tool synccheck --print-limit 5 build/tests/biofm_cuda_tests --gtest_filter="$f" > $OUT/sync.log 2>&1; echo "rc $?" >> $OUT/sync.log
  { echo "=== synccheck $f"; grep -m1 -A12 'error detected\|Error' $OUT/sync.log; grep -E 'SUMMARY|^rc |^\[  (PASSED|FAILED)' $OUT/sync.log; } >> $OUT/sync_C.txt
done
wait
cat $OUT/sync_C.txt; grep -E "^\[  (PASSED|FAILED) |FAILED|exit|tests ran" $OUT/cuda_tests_C.txt | head -20
