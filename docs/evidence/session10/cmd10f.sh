#!/usr/bin/env bash
# Session 10 device command F: racecheck (cuDNN kernels excluded, as in session 9's run D) of the
# 38 CUDA tests session 9's racecheck did not reach; 12 at a time, 300 s each.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
run() { local t=$1
  timeout 300 compute-sanitizer --tool racecheck --racecheck-report all --kernel-name-exclude kns=cudnn --print-limit 2 --error-exitcode 99 build/tests/biofm_cuda_tests --gtest_filter=$t > $OUT/$t.log 2>&1
  echo "$t rc $? $(grep -h 'RACECHECK SUMMARY' $OUT/$t.log) $(grep -c '^\[       OK' $OUT/$t.log) ok" >> $OUT/rc.txt
  grep -m1 -A4 'hazard' $OUT/$t.log | grep -v 'Host Frame' | cut -c1-200 | sed "s/^/$t: /" >> $OUT/rc.txt; rm $OUT/$t.log; }
export -f run
printf '%s\n' CudaBf16.ForwardBackwardEqualsBf16Mixed CudaEsm2.MatchesHuggingFaceBf16 CudaEsm2.MatchesHuggingFaceBf16Mixed CudaEsm2.MatchesHuggingFaceFp32 CudaFp8.Esm2TrainingTracksBf16 CudaGemm.LargeBF16 CudaGemm.LargeF32 CudaGemm.ThroughputReport CudaInfer.EmbeddingsMatchTheCpu CudaLlama.MatchesHuggingFaceBf16 CudaLlama.MatchesHuggingFaceBf16Mixed CudaLlama.MatchesHuggingFaceFp32 CudaLlamaGenerate.CachedEqualsUncachedGreedyF32 CudaLlamaGenerate.CachedLogitsMatchFullForwardF32 CudaLlamaGenerate.CachedRunsBf16Mixed CudaLoss.AllIgnoredAndBadLabels CudaLoss.CrossEntropyMatchesCpu CudaNorm.LayerNormForwardBackwardMatchCpu CudaNorm.LayerNormOptionalTensorsAndAliasing CudaNorm.MisalignedRowsUseTheScalarPath CudaNorm.RmsNormForwardBackwardMatchCpu CudaOptim.AdamWFlatLarge CudaOptim.AdamWFlatMatchesCpu CudaOptim.AdamWStepMatchesCpu CudaOptim.AdamWStepSmallBeta1 CudaOptim.BadArgumentsThrow CudaOptim.GradNormClipCoef CudaOptim.NonFiniteGradientsSkipTheStep CudaOptim.SumSquaresAndScale CudaOptim.ThroughputReport CudaOptimBf16.AdamWFlatMatchesCpu CudaOptimBf16.BadArgumentsThrow CudaOptimBf16.DecayRangesRespected CudaOptimBf16.NonFiniteGradientsSkipTheStep CudaRope.InverseUndoesForward CudaRope.MatchesCpu CudaRope.MisalignedViewUsesScalarPath CudaRope.QkvUnpackAndPackMatchCpu  | xargs -P 12 -I{} bash -c 'run {}'
sort $OUT/rc.txt > $OUT/racecheck_rest.txt; rm $OUT/rc.txt
awk '/ rc /{print $3}' $OUT/racecheck_rest.txt | sort | uniq -c
grep -v ' rc 0 ' $OUT/racecheck_rest.txt | head -60
