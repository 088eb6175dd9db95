#!/usr/bin/env bash
# Session 24 device command K (H100): the side-stream tests with the recompute cases added
# (FP8 current scaling, every layer recomputed in backward).
mkdir -p build/tests && xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests && export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} && timeout 150 build/tests/biofm_cuda_tests --gtest_filter="CudaSideStream.*" > $OUT/tests.log 2>&1; echo rc $?; grep -E "^\[  PASSED|^\[  FAILED|\[side stream\]|Failure" $OUT/tests.log
