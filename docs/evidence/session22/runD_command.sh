#!/usr/bin/env bash
# Session 22 device command D (H100): the norms' FP8-output kernel with tiles of 16/32/64 rows
# (run C's 16-row version saved nothing end to end): norm_fp8_bench, the CUDA tests of delayed
# scaling and the backend ops; then
# ESM-2 650M FP8 DelayedScaling with fp8_norm_codes on / off alternating (range times), and Llama
# 1B FP8 DelayedScaling (one 8192-token window) on / off.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
xz -dc .carry/pack/norm_fp8_bench.xz > build/norm_fp8_bench && chmod +x build/norm_fp8_bench
timeout 60 build/norm_fp8_bench 50 > $OUT/norm_fp8_bench.txt 2>&1; echo "norm_fp8_bench rc $?" >> $S; cat $OUT/norm_fp8_bench.txt >> $S
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaFp8Delayed.*:BackendOps.*:CudaFp8.ReleasingInputs*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|NormCodes|GeluCodes" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -80 >> $S
D=.carry/data
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
R="fp8_config.fp8_recipe=DelayedScaling"
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B() {  # name, extra args...
  local name=$1; shift
  timeout 80 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
  grep -E "  (train_step|forward|backward|attention forward|mlp forward|optimizer) " /tmp/$name.log | head -6 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6 --fp8 $R"
B esm_codes_1 $E ops.fp8_norm_codes=true $W
B esm_kernels_1 $E ops.fp8_norm_codes=false $W
B esm_codes_2 $E ops.fp8_norm_codes=true
B esm_kernels_2 $E ops.fp8_norm_codes=false
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 8192 --steps 10 --warmup 4 --fp8 $R"
B llama_codes $L ops.fp8_norm_codes=true
B llama_kernels $L ops.fp8_norm_codes=false
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
