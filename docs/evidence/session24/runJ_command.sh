#!/usr/bin/env bash
# Session 24 device command J (H100): after the small-models test helper (tests/cuda/small_models.h)
# replaced the copies in side_stream_test.cpp and fp8_test.cpp.
mkdir -p build/tests && xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests && export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} && timeout 150 build/tests/biofm_cuda_tests --gtest_filter="CudaSideStream.*:CudaFp8.ReleasingInputs*" > $OUT/tests.log 2>&1; echo rc $?; grep -E "^\[  PASSED|^\[  FAILED|\[side stream\]|\[fp8 release" $OUT/tests.log
