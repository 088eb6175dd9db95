#!/usr/bin/env bash
# Session 29 device command I (one H200): run H's test step stopped at its 200 s limit inside the
# long CPU-curve test CudaEsm2.TrainingCurveMatchesCpu (no failure before it); the suites it had
# not reached, on a604511's test binary.
mkdir -p build/tests /work && ln -sfn $PWD /work/ci-clone5 && xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests && export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} && timeout 110 build/tests/biofm_cuda_tests --gtest_filter='CudaNorm*:CudaActivation*:CudaSideStream*:CudaAttentionFp8*' > $OUT/runI_tests.log 2>&1; echo "rc $?"; grep -E "^\[  FAILED|^\[  PASSED|^\[==========\]|Failure" $OUT/runI_tests.log | head; grep -c "^\[       OK" $OUT/runI_tests.log
