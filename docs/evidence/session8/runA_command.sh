#!/usr/bin/env bash
# Session 8 device command (one GPU: nvidia-h100-x1 or nvidia-h200): PHASE=A|B. Fuzz campaign on ~25 cores beside the
# CUDA suite and compute-sanitizer runs on the two GPUs. Build-fuzz corpora persist between A and B.
set -u
PHASE=${1:-A}
mkdir -p build/tests $OUT
[ -x build/biofm ] || { xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm; }
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
if [ ! -d build-fuzz/fuzz ]; then mkdir -p build-fuzz && tar xJf .carry/pack/fuzz.tar.xz -C build-fuzz; fi
nproc > $OUT/nproc.txt; nvidia-smi --query-gpu=name --format=csv >> $OUT/nproc.txt
export FUZZ_PARALLEL=1 FUZZ_FORK=1 FUZZ_FORK_fuzz_yaml_config=6 FUZZ_FORK_fuzz_reader=2 FUZZ_FORK_fuzz_safetensors=2
( fuzz/run_all.sh ${FUZZ_SECS:-530} > $OUT/fuzz_$PHASE.txt 2>&1; echo "fuzz exit $?" >> $OUT/fuzz_$PHASE.txt ) &
F='-*Training*:*Curve*:*Throughput*:*Large*:*Stress*'
if [ "$PHASE" = A ]; then
  ( CUDA_VISIBLE_DEVICES=0 timeout 400 build/tests/biofm_cuda_tests > $OUT/cuda_tests.txt 2>&1; echo "cuda tests exit $?" >> $OUT/cuda_tests.txt
    CUDA_VISIBLE_DEVICES=0 OUT=$OUT/s0 SANITIZE_TIMEOUT=120 GTEST_FILTER="$F" tools/gpu_sanitize.sh build synccheck > $OUT/s0.txt 2>&1 ) &
  ( CUDA_VISIBLE_DEVICES=0 OUT=$OUT/s1 SANITIZE_TIMEOUT=130 GTEST_FILTER="$F" tools/gpu_sanitize.sh build memcheck > $OUT/s1.txt 2>&1
    CUDA_VISIBLE_DEVICES=0 OUT=$OUT/s2 SANITIZE_TIMEOUT=130 GTEST_FILTER="$F" tools/gpu_sanitize.sh build racecheck > $OUT/s2.txt 2>&1 ) &
else
  ( CUDA_VISIBLE_DEVICES=0 OUT=$OUT/s3 SANITIZE_TIMEOUT=480 GTEST_FILTER="$F" tools/gpu_sanitize.sh build initcheck > $OUT/s3.txt 2>&1 ) &
  ( CUDA_VISIBLE_DEVICES=0 OUT=$OUT/s4 SANITIZE_TIMEOUT=480 GTEST_FILTER='*Training*:*Curve*' tools/gpu_sanitize.sh build memcheck > $OUT/s4.txt 2>&1 ) &
fi
wait
cat $OUT/fuzz_$PHASE.txt; grep -E "^\[  (PASSED|FAILED) |FAILED|exit" $OUT/cuda_tests.txt 2>/dev/null | head; cat $OUT/s*/sanitize/summary.txt 2>/dev/null
tar czf $OUT/fuzzlogs_$PHASE.tgz build-fuzz/fuzz-logs build-fuzz/fuzz-crashes 2>/dev/null; du -sh build-fuzz/fuzz-corpus
