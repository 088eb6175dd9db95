#!/usr/bin/env bash
# Session 20 device command B (H100), binaries of 1795c00 (profiler.range_times): the CUDA tests
# of the range timer and the core; ESM-2 650M bf16 bench without and with range_times (steps
# 10-13 of 8 warm-up + 20 timed: its cost) and the per-range table; Llama 1B bf16 (one 8192-token
# window) with the table.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaRangeTimer*:CudaCore*:CudaFp8.Esm2*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
D=.carry/data
W="profiler.start_step=10 profiler.end_step=13 profiler.range_times=true"
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for v in plain timed plain2 timed2; do
  extra=""; case $v in timed*) extra="$W";; esac
  timeout 100 build/biofm bench $E $extra --json $OUT/esm650_$v.json > /tmp/esm650_$v.log 2>&1
  echo "esm650 $v rc $? $(grep -E 'real tok/s' /tmp/esm650_$v.log | sed 's/biofm esm2_t33_650M: //')" >> $S
done
cat /tmp/esm650_timed.log | sed -n '/range times/,$p' >> $S
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
timeout 100 build/biofm bench --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 \
  --tokens-per-batch 8192 --steps 10 --warmup 4 profiler.start_step=6 profiler.end_step=9 profiler.range_times=true \
  --json $OUT/llama1b_timed.json > /tmp/llama1b_timed.log 2>&1
echo "llama1b timed rc $?" >> $S
cat /tmp/llama1b_timed.log >> $S
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
