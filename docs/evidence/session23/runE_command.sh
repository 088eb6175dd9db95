#!/usr/bin/env bash
# Session 23 device command E (H100): the amax check reads L2 (__ldcg; an L1 copy kept each SM's
# first value, so run D's library kernel still sent most atomics), and fp8_quantize records a
# weight's amax in the pass that makes its codes. bench/fp8_gelu_bench.cpp; the CUDA tests of the
# FP8 / delayed / GELU / norm / rope ops and the ESM-2 model; ESM-2 650M FP8 DelayedScaling before
# the session (cdb8386) and now, alternating, with range times; Llama 1B FP8 DelayedScaling.
set -u
mkdir -p build/tests $OUT
for b in biofm biofm_old fp8_gelu_bench; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 60 build/fp8_gelu_bench 50 > $OUT/fp8_gelu_bench.txt 2>&1; echo "fp8_gelu_bench rc $?" >> $S; cat $OUT/fp8_gelu_bench.txt >> $S
timeout 230 build/tests/biofm_cuda_tests \
  --gtest_filter="CudaActivation.*:BackendOps.*:CudaFp8Delayed.*:CudaFp8.*:CudaGemm.*:CudaEsm2.*:CudaNorm.*:CudaRope.*:-*TrainingCurve*" \
  > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|QuantizeRecord" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -80 >> $S
D=.carry/data
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 75 build/$bin bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
  grep -E "  (train_step|forward|backward|mlp forward|mlp backward|optimizer) " /tmp/$name.log | head -6 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6"
R="--fp8 fp8_config.fp8_recipe=DelayedScaling"
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B esm_fp8_new_1 biofm $E $R $W
B esm_fp8_old_1 biofm_old $E $R $W
B esm_fp8_new_2 biofm $E $R
B esm_fp8_old_2 biofm_old $E $R
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 8192 --steps 10 --warmup 4 $R"
B llama_fp8_new biofm $L
tail -c 40000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
cat $S
