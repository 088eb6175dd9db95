#!/usr/bin/env bash
# Session 8 device command B: the CUDA suite alone; compute-sanitizer's first reports, kept small.
set -u
mkdir -p $OUT
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
( timeout 420 build/tests/biofm_cuda_tests > $OUT/cuda_tests_B.txt 2>&1; echo "cuda tests exit $?" >> $OUT/cuda_tests_B.txt ) &
d=$(mktemp -d)
san() { # san TOOL NAME ARGS...: first 150 lines of the report and the summary
  local t=$1 n=$2; shift 2
  timeout 150 $cs --tool $t --print-limit 12 "$@" > $d/$t.$n.log 2>&1; echo "rc $?" >> $d/$t.$n.log
  { echo "=== $t $n"; grep -m1 -B2 -A40 '=========' $d/$t.$n.log | head -80; grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^rc ' $d/$t.$n.log; } >> $OUT/san_B.txt
}
san memcheck esm2 build/biofm train --config-dir configs --config-name esm2_sanity device=cuda num_train_steps=4 dataset.path=data/proteins_sample.fasta dataset.val_path=null dataset.val_every_n_steps=0 checkpoint.save_every_n_steps=2 output_dir=$d/e logger.tensorboard=false
san synccheck gemm build/tests/biofm_cuda_tests --gtest_filter='CudaGemm.*:-*Large*:*Throughput*'
san synccheck norm build/tests/biofm_cuda_tests --gtest_filter='CudaNorm.*:CudaRope.*:CudaLoss.*'
san memcheck ops build/tests/biofm_cuda_tests --gtest_filter='CudaNorm.*:CudaRope.*:CudaLoss.*:CudaOptim.*:-*Throughput*:*Large*'
san racecheck ops build/tests/biofm_cuda_tests --gtest_filter='CudaNorm.*:CudaLoss.*:CudaRope.*'
san initcheck ops build/tests/biofm_cuda_tests --gtest_filter='CudaNorm.*:CudaLoss.*:CudaRope.*:CudaOptim.*:-*Throughput*:*Large*'
wait
grep -E "^\[  (PASSED|FAILED) |FAILED|exit" $OUT/cuda_tests_B.txt | head; grep -E '^\[       OK \]' $OUT/cuda_tests_B.txt | sed -E 's/.*\] ([^ ]+) \(([0-9]+) ms\)/\2 \1/' | sort -rn | head -5
grep -E '^===|SUMMARY|^rc' $OUT/san_B.txt
