#!/usr/bin/env bash
# Session 20 device command F (H100), the final binaries: CUDA tests of the models, inference and
# the range timer; then where the step goes with the per-layer attention / sdpa / mlp ranges:
# ESM-2 650M bf16 and FP8 (16,384-token batches), Llama 1B bf16 (one 8192-token window).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaRangeTimer*:CudaModels*:CudaInfer*:CudaAttention*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
D=.carry/data
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
B() {  # name, args...
  local name=$1; shift
  timeout 100 build/biofm bench "$@" $W --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "== $name rc $?" >> $S
  grep -E "real tok/s|range|calls|train_step|forward|backward|optimizer|sdpa|mlp|attention" /tmp/$name.log >> $S
}
B esm650_bf16 --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 12 --warmup 4
B esm650_fp8 --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 12 --warmup 4 --fp8
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B llama1b_bf16 --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 8192 --steps 12 --warmup 4
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
