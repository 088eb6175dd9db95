#!/usr/bin/env bash
# PREPARED, NOT RUN: session 26 had too little device time left to start a machine.
# Session 26 device command G (one H200): the side-stream CUDA tests with the test's new memory
# bound under recompute (one layer's activations above the one-stream peak), three times.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
for i in 1 2 3; do
  timeout 40 build/tests/biofm_cuda_tests --gtest_filter='CudaSideStream.*' > /tmp/s$i.log 2>&1
  echo "run $i rc $?"; grep -E "^\[  PASSED|^\[  FAILED|recompute|actual" /tmp/s$i.log
done | tee $OUT/summary.txt
