#!/usr/bin/env bash
# Session 26 device command A (nvidia-h200-x2, two H200): the standing figures on the H200, the
# kind lent now (earlier figures are H100). GPU 1: the compiled, length-grouped HF peer of ESM-2
# 650M (torch.compile dynamic, group_by_length, cold Inductor cache). GPU 0 meanwhile: the whole
# CUDA suite of main (4814b00, built on the CPU machine), then biofm bench ESM-2 650M bf16 (x2),
# FP8 DelayedScaling, Llama 1B bf16 at the recipe batch, and embed vs HF bf16 (4,000 proteins).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1 OMP_NUM_THREADS=8
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
# GPU 1: the peer (warm-up compiles; the script reports all timed steps and those that did not compile)
( CUDA_VISIBLE_DEVICES=1 TORCHINDUCTOR_CACHE_DIR=/tmp/ind timeout 520 python3 bench/hf_peer_bench.py --model esm2 \
    --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --max-seq-length 1024 --group-by-length \
    --steps 30 --warmup 10 --compile --compile-dynamic --json $OUT/hf_esm2_650M_compiled_grouped.json \
    > $OUT/peer.log 2>&1; echo "peer rc $?" > /tmp/peer_rc ) &
export CUDA_VISIBLE_DEVICES=0
timeout 230 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
tail -c 30000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
B() {  # name, extra args...
  local name=$1; shift
  timeout 90 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm_bf16_1 $E
B esm_fp8_delayed $E --fp8 fp8_config.fp8_recipe=DelayedScaling
B esm_bf16_2 $E
B llama_1B_recipe --model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 16384 --max-seq-length 8192 \
  --grad-acc 4 --steps 6 --warmup 2
timeout 150 bash bench/embed_vs_hf.sh build/biofm --data $D/uniprot_20k.fasta.gz --records 4000 --out /tmp/evh \
  > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S
tail -6 $OUT/embed_vs_hf.txt >> $S
wait
cat /tmp/peer_rc >> $S
grep -E "tok/s|tokens/s|steady|compil" $OUT/peer.log | tail -8 >> $S
cat $S
