#!/usr/bin/env bash
# Session 14 device command E (H100): GEMM autotune with L2-cold timing, on/off alternating for
# ESM-2 650M / 150M and Llama 1B; bias-gradient routes on their own at 650M and 150M shapes.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/norm_bias_bench.xz > /tmp/nb && chmod +x /tmp/nb
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 60 build/tests/biofm_cuda_tests --gtest_filter="CudaGemm.*:CudaEsm2.Matches*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
gzip $OUT/cuda_tests.log
timeout 150 /tmp/nb 30 > $OUT/norm_bias_bench.txt 2>&1; echo "norm_bias_bench rc $?" >> $S
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
E150="--model esm2 --shape 150M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
for r in 1 2; do
  B esm650_tune_$r $E ops.gemm_autotune=true; B esm650_notune_$r $E ops.gemm_autotune=false
  B esm150_tune_$r $E150 ops.gemm_autotune=true; B esm150_notune_$r $E150 ops.gemm_autotune=false
done
B esm150_notune_bgradb $E150 ops.gemm_autotune=false ops.gemm_fused_bgrad=true
B esm650_notune_bgradb $E ops.gemm_autotune=false ops.gemm_fused_bgrad=true
B llama1b_tune $L ops.gemm_autotune=true; B llama1b_notune $L ops.gemm_autotune=false
cat $S
