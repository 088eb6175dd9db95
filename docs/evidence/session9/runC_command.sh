#!/usr/bin/env bash
# Session 9 device command C: racecheck + synccheck over the whole suite (per test), and beside them:
# memcheck --leak-check of a few tests and both `biofm train` runs after the release-at-exit change,
# initcheck of the two FP8 tests with host-API reports, with full backtraces.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
X=$OUT/extra.txt; d=$(mktemp -d)
( export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
  cs() { local n=$1; shift; timeout 300 compute-sanitizer "$@" > $d/$n.log 2>&1; echo "rc $?" >> $d/$n.log
    { echo "=== $n"; grep -E 'ERROR SUMMARY|LEAK SUMMARY|^rc |^\[  (PASSED|FAILED)' $d/$n.log
      grep -m2 -A12 '^========= \(Leaked\|Invalid\|Host API\|Uninit\|Program hit\)' $d/$n.log | grep -v 'libcudart\|testing::\|^=========     Address' | head -30; } >> $X; }
  cs mc_tests --tool memcheck --leak-check full --error-exitcode 99 build/tests/biofm_cuda_tests --gtest_filter='CudaGemm.LargeF32:CudaAttention.AutoPathMatchesCpu:CudaBf16.ForwardBackwardEqualsBf16Mixed:CudaLlama.MatchesHuggingFaceBf16' &
  cs ic_fp8 --tool initcheck --error-exitcode 99 --print-limit 3 build/tests/biofm_cuda_tests --gtest_filter='CudaFp8.CachedWeightCodesGiveTheSameResults:CudaFp8.SavedInputCodesGiveTheSameWeightGradient' &
  cs mc_esm2 --tool memcheck --leak-check full --error-exitcode 99 build/biofm train --config-dir configs --config-name esm2_sanity device=cuda num_train_steps=4 dataset.path=data/proteins_sample.fasta dataset.val_path=null dataset.val_every_n_steps=0 checkpoint.save_every_n_steps=2 output_dir=$d/e logger.tensorboard=false
  cs mc_llama --tool memcheck --leak-check full --error-exitcode 99 build/biofm train --config-dir configs --config-name llama3_sanity device=cuda num_train_steps=4 dataset.path=data/dna_sample.fasta dataset.val_path=null dataset.val_every_n_steps=0 checkpoint.save_every_n_steps=2 output_dir=$d/l logger.tensorboard=false
  wait ) &
TOTAL=${TOTAL:-450} SANITIZE_TIMEOUT=${SANITIZE_TIMEOUT:-330} bash .carry/pack/cmd9b.sh "racecheck synccheck" 6 0
wait
cat $X >> $OUT/summary_racecheck_synccheck.txt
cat $X; grep -E '^(racecheck|synccheck) ' $OUT/summary_racecheck_synccheck.txt | awk '{print $1, $4}' | sort | uniq -c
