#!/usr/bin/env bash
# Session 23 device command B (H100): amax_reduce_into skips the atomics that cannot raise the
# maximum. bench/fp8_gelu_bench.cpp and norm_fp8_bench after it (run A has the GELU bench before);
# the CUDA tests of the ops that record an amax; ESM-2 650M FP8 DelayedScaling with the binary
# before (cdb8386) and after, alternating, with range times; Llama 1B FP8 DelayedScaling both.
set -u
mkdir -p build/tests $OUT
for b in biofm biofm_old fp8_gelu_bench norm_fp8_bench; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
for b in fp8_gelu_bench norm_fp8_bench; do
  timeout 60 build/$b 50 > $OUT/$b.txt 2>&1; echo "$b rc $?" >> $S; cat $OUT/$b.txt >> $S
done
timeout 200 build/tests/biofm_cuda_tests \
  --gtest_filter="CudaActivation.*:BackendOps.*:CudaBlockScale.*:CudaFp8Delayed.*:CudaFp8.*:CudaNorm.*:CudaRope.*:-*TrainingCurve*" \
  > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -80 >> $S
D=.carry/data
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
R="fp8_config.fp8_recipe=DelayedScaling"
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 80 build/$bin bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
  grep -E "  (train_step|forward|backward|attention forward|mlp forward|mlp backward|optimizer) " /tmp/$name.log | head -7 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6 --fp8 $R"
B esm_new_1 biofm $E $W
B esm_old_1 biofm_old $E $W
B esm_new_2 biofm $E
B esm_old_2 biofm_old $E
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 8192 --steps 10 --warmup 4 --fp8 $R"
B llama_new biofm $L
B llama_old biofm_old $L
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
