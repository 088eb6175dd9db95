#!/usr/bin/env bash
# Session 9 device command D: racecheck with NVIDIA's library kernels (cudnn, cublasLt, nvjet) excluded, on the
# tests whose racecheck reports began in those kernels; 50 s each, all at once.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
for t in BackendOps.EveryOpMatchesTheCpuReference CudaAttention.AutoPathMatchesCpu CudaAttention.BshdPaddingRowsCudnn CudaAttention.CudnnGraphsAreBucketed CudaAttention.PathsShareTheLseConvention CudaAttention.SequencesAreIsolatedCudnn CudaBlockScale.EmulatedTrainingTracksBf16 CudaFp8Delayed.ModelStateMatchesCpu CudaFp8Delayed.TrainingTracksBf16 CudaFp8.LlamaTrainingTracksBf16 CudaFp8.WeightCodesAreRefreshedAfterAnOptimizerStep CudaGemm.BiasGradRepeatable CudaGemm.LongReductionWithBias CudaInfer.ScoresMatchTheCpu; do
  ( timeout 45 compute-sanitizer --tool racecheck --racecheck-report all --kernel-name-exclude kns=cudnn --kernel-name-exclude kns=cublasLt --kernel-name-exclude kns=nvjet --print-limit 2 --error-exitcode 99 build/tests/biofm_cuda_tests --gtest_filter=$t > $OUT/$t.log 2>&1
    echo "$t rc $? $(grep -h 'RACECHECK SUMMARY' $OUT/$t.log) $(grep -c '^\[       OK' $OUT/$t.log) ok" >> $OUT/rc.txt
    grep -m1 -A3 'hazard' $OUT/$t.log | sed "s/^/$t: /" >> $OUT/rc.txt; rm $OUT/$t.log ) &
done
wait; cat $OUT/rc.txt
