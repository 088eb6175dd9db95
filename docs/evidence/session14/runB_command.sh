#!/usr/bin/env bash
# Session 14 device command B (H100): CUDA suite; norm/bias bench with the new automatic choices;
# ESM-2 650M and Llama 1B end to end, session 13's binary against this one (GEMM autotune on/off,
# bias-gradient routes, cuDNN SDPA autotune); embed 4,000 proteins old vs new.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_b950ea5.xz > /tmp/biofm_old && chmod +x /tmp/biofm_old
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
timeout 60 /tmp/nb 30 > $OUT/norm_bias_bench.txt 2>&1; echo "norm_bias_bench rc $?" >> $S
B() { local tag=$1 bin=$2; shift 2; $bin bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do
  B esm_old_$r /tmp/biofm_old $E; B esm_new_$r build/biofm $E; B esm_new_notune_$r build/biofm $E ops.gemm_autotune=false
  B esm_new_colsum_$r build/biofm $E ops.gemm_fused_bgrad=false
done
B esm_new_sdpatune build/biofm $E ops.sdpa_autotune=true
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
B llama_old /tmp/biofm_old $L; B llama_new build/biofm $L; B llama_new_notune build/biofm $L ops.gemm_autotune=false
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -6 $OUT/embed_vs_hf.txt >> $S
for r in 1 2; do
  for b in /tmp/biofm_old build/biofm; do
    $b embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --output /tmp/oe.safetensors --device cuda > /tmp/emb.log 2>&1
    echo "embed 4000 $b rc $? $(grep -o '[0-9]* records in .*' /tmp/emb.log)" >> $S
  done
done
cat $S
