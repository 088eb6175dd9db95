#!/usr/bin/env bash
# Session 17 device command H (H100): (1) CUDA tests touched by the shared compute-capability
# lookup (fused GELU GEMMs, cuDNN attention, backend ops, inference); (2) an experiment: FP8
# inference with the first and last layers in bf16 (the recipes' habit; binary biofm_edge,
# not committed) against every layer in FP8: speed and error against fp32.
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_edge.xz > build/biofm_edge && chmod +x build/biofm_edge
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/bench
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="*Gelu*:CudaAttention*:BackendOps.*:CudaInfer.*:CudaEsm2*" > $OUT/tests.log 2>&1
echo "tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:" $OUT/tests.log >> $S
grep -B3 -A12 "Failure" $OUT/tests.log | head -40 >> $S
rm -f $OUT/tests.log
python3 - <<'PY' >> $S 2>&1
import gzip, torch
from hf_peer_bench import build_esm
torch.manual_seed(0)
model, dims = build_esm("650M")
model.save_pretrained("/tmp/e/esm2_650M")
n = 0
with gzip.open(".carry/data/uniprot_20k.fasta.gz", "rt") as f, open("/tmp/e/in.fasta", "w") as o:
    for line in f:
        if line.startswith(">"):
            n += 1
            if n > 4000: break
        o.write(line)
PY
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 --input /tmp/e/in.fasta"
build/biofm $E --precision fp32 --output /tmp/e/fp32.safetensors > /dev/null 2>&1; echo "fp32 rc $?" >> $S
for r in 1 2; do
  build/biofm $E --precision fp8 --output /tmp/e/all$r.safetensors > /tmp/e/l.log 2>&1
  echo "fp8 all layers rc $? $(grep 'records in' /tmp/e/l.log | sed 's/.*|//')" >> $S
  build/biofm_edge $E --precision fp8 --output /tmp/e/edge$r.safetensors > /tmp/e/l.log 2>&1
  echo "fp8 first/last bf16 rc $? $(grep 'records in' /tmp/e/l.log | sed 's/.*|//')" >> $S
done
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
ref = load_file('/tmp/e/fp32.safetensors')['embeddings'].astype(np.float64)
for p in ['all1', 'edge1']:
    x = load_file(f'/tmp/e/{p}.safetensors')['embeddings'].astype(np.float64)
    rel = (np.abs(x - ref).max(1) / np.abs(ref).max(1)).max()
    cos = ((x * ref).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(ref, axis=1))
    print(f'{p} vs fp32: max rel err {rel:.3e}, min cosine {cos.min():.6f}, median cosine {np.median(cos):.6f}')
PY
cat $S
