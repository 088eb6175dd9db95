#!/usr/bin/env bash
# Session 14 device command F (H100): final binaries (commit dc8c137 + the column-sum finishing
# kernel): CUDA suite; bias-gradient routes on their own; ESM-2 650M / 150M / FP8 and Llama 1B
# end to end with the shipped defaults, and the BGRADB route against the column sums.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/norm_bias_bench.xz > /tmp/nb && chmod +x /tmp/nb
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 280 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
timeout 100 /tmp/nb 30 2>&1 | sed -n '/^linear/,$p' > $OUT/norm_bias_bench.txt; echo "norm_bias_bench rc $?" >> $S
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
E150="--model esm2 --shape 150M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do
  B esm650_$r $E; B esm650_bgradb_$r $E ops.gemm_fused_bgrad=true
  B esm150_$r $E150; B esm150_bgradb_$r $E150 ops.gemm_fused_bgrad=true
done
B esm650_fp8 $E --fp8
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B llama1b --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2
cat $S
