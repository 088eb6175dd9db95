#!/usr/bin/env bash
# Session 12 device command A: CUDA tests of the FP8 code motion; embed baseline; ncu of embed.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
timeout 240 build/tests/biofm_cuda_tests --gtest_filter='CudaBlockScale*:CudaFp8*:*Fp8Block*:*BlockScal*' > $OUT/cuda_tests.log 2>&1
echo "tests rc $?" >> $S; grep -E "^\[  (PASSED|FAILED)|^\[  FAILED" $OUT/cuda_tests.log >> $S
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -12 $OUT/embed_vs_hf.txt >> $S
zcat .carry/data/uniprot_20k.fasta.gz > /tmp/all.fasta
for mt in 16384 32768; do
  build/biofm embed --model /tmp/e/esm2_650M --input /tmp/all.fasta --output /tmp/o20k_$mt --device cuda --max-tokens $mt > $OUT/embed20k_$mt.log 2>&1
  echo "embed20k max-tokens $mt rc $? $(grep records/s $OUT/embed20k_$mt.log)" >> $S
done
timeout 240 ncu --metrics gpu__time_duration.sum --csv --launch-skip 3000 --launch-count 800 build/biofm embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --output /tmp/o_ncu --device cuda --max-tokens 16384 > $OUT/ncu_embed.csv 2> $OUT/ncu_embed.err
echo "ncu rc $?" >> $S; gzip $OUT/ncu_embed.csv
cat $S
