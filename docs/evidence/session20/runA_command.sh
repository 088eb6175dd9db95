#!/usr/bin/env bash
# Session 20 device command A (H100), binaries of the zero2-sharded-gradients commit: the CUDA
# suite (minus the recipe curves: nothing of theirs changed), two CPU ranks under torchrun with
# distributed.strategy=zero2 (Gloo), ESM-2 650M bf16 bench; then embed of all 20,000 UniProt
# proteins (ESM-2 650M shape, random weights saved by transformers) with and without
# ops.gemm_autotune, alternating.
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
# The model directory for embed, made by transformers while the tests run on the GPU.
( python3 -c "
import sys; sys.path.insert(0, 'bench')
from hf_peer_bench import build_esm
m, dims = build_esm('650M'); m.save_pretrained('/tmp/e/esm2_650M'); print(dims)" > /tmp/e/make_model.log 2>&1 ) &
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
timeout 100 torchrun --standalone --nproc-per-node 2 --no-python build/biofm train --config-dir configs \
  --config-name esm2_sanity device=cpu num_train_steps=10 logger.frequency=5 output_dir=/tmp/tr \
  distributed.strategy=zero2 checkpoint.save_every_n_steps=10 > /tmp/torchrun_zero2.log 2>&1
echo "torchrun zero2 rc $?" >> $S
grep -E "distributed:|^step|done:|error" /tmp/torchrun_zero2.log | head -6 >> $S
D=.carry/data
timeout 100 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
  --steps 20 --warmup 8 > /tmp/esm650_bf16.log 2>&1
echo "esm650_bf16 rc $? $(grep -E 'tok/s' /tmp/esm650_bf16.log | tail -1 | sed 's/biofm esm2_t33_650M: //')" >> $S
grep "GPU during" /tmp/esm650_bf16.log | sed 's/^/    /' >> $S
# Float8BlockScaling with the recipe's E4M3 gradients (og2_7b_fp8.yaml now) against HYBRID, Llama 1B, 1 window
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
for fmt in E4M3 HYBRID; do
  timeout 100 build/biofm bench --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 \
    --tokens-per-batch 8192 --steps 10 --warmup 4 --fp8 fp8_config.fp8_recipe=Float8BlockScaling \
    fp8_config.fp8_format=$fmt > /tmp/llama_block_$fmt.log 2>&1
  echo "llama1b block $fmt rc $? $(grep -E 'tok/s' /tmp/llama_block_$fmt.log | tail -1 | sed 's/biofm llama3_1b: //')" >> $S
  grep -iE "fp8|layers" /tmp/llama_block_$fmt.log | head -2 | sed 's/^/    /' >> $S
done
wait
cat /tmp/e/make_model.log >> $S
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 --input $D/uniprot_20k.fasta.gz"
for r in 1 2; do
  for v in default autotune; do
    ops=""; [ $v = autotune ] && ops="--ops gemm_autotune=true"
    timeout 60 build/biofm $E $ops --output /tmp/e/${v}_$r.safetensors > /tmp/e/${v}_$r.log 2>&1
    echo "embed 20k $v run $r rc $? $(grep 'records in' /tmp/e/${v}_$r.log | sed 's/.*|//')" >> $S
  done
done
tar czf $OUT/logs.tgz /tmp/e/*.log /tmp/*.log 2>/dev/null
cat $S
