#!/usr/bin/env bash
# Session 24 device command D (H100): the side-stream tests after the peak-memory fix; the
# overlap bench with the main stream at the highest priority as a third mode.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaSideStream.*" > /tmp/t.log 2>&1
echo "side stream tests rc $?" > $S
grep -E "^\[  PASSED|^\[  FAILED|\[side stream\]|Failure|Expected|actual" /tmp/t.log >> $S
.carry/pack/wgrad_overlap_bench 4 > $OUT/wgrad_overlap.txt 2>&1
grep "mean of" $OUT/wgrad_overlap.txt >> $S
cat $S
