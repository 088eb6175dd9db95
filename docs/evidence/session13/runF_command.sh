#!/usr/bin/env bash
# Session 13 device command F (H100): the final fused-GELU range (H 1024-2048) — CUDA suite;
# ESM-2 150M / 650M end to end; embed with ops.sdpa_autotune (via --ops) against the default.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 240 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E150="--model esm2 --shape 150M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm150 $E150
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm650 $E
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -6 $OUT/embed_vs_hf.txt >> $S
zcat .carry/data/uniprot_20k.fasta.gz > /tmp/all.fasta
for r in 1 2; do
  for o in sdpa_autotune=false sdpa_autotune=true; do
    build/biofm embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --output /tmp/oe.safetensors --device cuda --ops $o > /tmp/emb.log 2>&1
    echo "embed 4000 --ops $o rc $? $(grep -o '[0-9]* records in .*' /tmp/emb.log)" >> $S
  done
done
for o in sdpa_autotune=false sdpa_autotune=true; do
  build/biofm embed --model /tmp/e/esm2_650M --input /tmp/all.fasta --output /tmp/oe20k_$o --device cuda --ops $o > /tmp/emb.log 2>&1
  echo "embed 20000 --ops $o rc $? $(grep -o '[0-9]* records in .*' /tmp/emb.log)" >> $S
done
cat $S
