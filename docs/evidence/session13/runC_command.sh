#!/usr/bin/env bash
# Session 13 device command B: fused GEMM+GELU (chosen tile configs) microbench; CUDA suite;
# ESM-2 650M / 150M end to end fused vs unfused; embed vs HF, and embed fused vs unfused.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
xz -dc .carry/pack/mlp_gelu_bench.xz > /tmp/mb && chmod +x /tmp/mb && timeout 100 /tmp/mb 30 > $OUT/mlp_gelu_bench.txt 2>&1
echo "mlp_gelu_bench rc $?" >> $S; cat $OUT/mlp_gelu_bench.txt >> $S
export OMP_NUM_THREADS=16
timeout 240 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
grep -E "gelu" $OUT/cuda_tests.log | grep -v "^\[ *OK" | head -20 >> $S
gzip $OUT/cuda_tests.log
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do B esm650_unfused_$r $E ops.gemm_fused_gelu=false; B esm650_fused_$r $E; done
E150="--model esm2 --shape 150M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm150_unfused $E150 ops.gemm_fused_gelu=false; B esm150_fused $E150
timeout 200 bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -8 $OUT/embed_vs_hf.txt >> $S
for r in 1 2; do
  for o in gemm_fused_gelu=false gemm_fused_gelu=true; do
    build/biofm embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --output /tmp/oe_$o.safetensors --device cuda --ops $o > /tmp/emb.log 2>&1
    echo "embed 4000 --ops $o rc $? $(grep records/s /tmp/emb.log)" >> $S
  done
done
python3 - >> $S 2>&1 <<'PY'
from safetensors.torch import load_file
import numpy as np
a = load_file('/tmp/oe_gemm_fused_gelu=false.safetensors')['embeddings'].float().numpy()
b = load_file('/tmp/oe_gemm_fused_gelu=true.safetensors')['embeddings'].float().numpy()
print('embed fused vs unfused: rel err %.3e, max abs %.3e' % (np.linalg.norm(a - b) / np.linalg.norm(a), np.abs(a - b).max()))
PY
cat $S
