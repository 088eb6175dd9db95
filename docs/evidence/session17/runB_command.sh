#!/usr/bin/env bash
# Session 17 device command B (H100): `--precision fp8` for inference. CudaInfer/ModelFlags tests;
# embed_vs_hf.sh (HF bf16, biofm bf16 and fp32, 4,000 UniProt proteins, ESM-2 650M shape); then
# biofm fp8 on the same proteins, alternating with bf16, and fp8's errors against biofm fp32;
# then ncu kernel time of a window of the bf16 and fp8 embed runs.
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaInfer.*:ModelFlags.*" > $OUT/infer_tests.log 2>&1
echo "infer tests rc $?" >> $S
grep -E "fp8 embeddings|^\[  PASSED|^\[  FAILED|Failure" -A3 $OUT/infer_tests.log | head -30 >> $S
rm -rf /tmp/e2; timeout 240 bash bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e2 > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -7 $OUT/embed_vs_hf.txt >> $S
E="embed --model /tmp/e2/esm2_650M --device cuda --max-tokens 16384 --input /tmp/e2/input.fasta"
for r in 1 2; do for p in fp8 bf16; do
  build/biofm $E --precision $p --output /tmp/e/$p$r.safetensors > /tmp/e/$p$r.log 2>&1
  echo "$p run $r rc $? $(grep 'records in' /tmp/e/$p$r.log | sed 's/.*|//')" >> $S
done; done
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
ref = load_file('/tmp/e2/biofm_fp32.safetensors')['embeddings'].astype(np.float64)
for p in ['bf16', 'fp8']:
    x = load_file(f'/tmp/e/{p}1.safetensors')['embeddings'].astype(np.float64)
    rel = (np.abs(x - ref).max(1) / np.abs(ref).max(1)).max()
    cos = ((x * ref).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(ref, axis=1))
    print(f'{p} vs biofm fp32: max rel err {rel:.3e}, min cosine {cos.min():.6f}, median cosine {np.median(cos):.6f}')
y = load_file('/tmp/e/fp82.safetensors')['embeddings']
print('fp8 run 1 vs 2 identical:', bool((load_file('/tmp/e/fp81.safetensors')['embeddings'] == y).all()))
PY
for p in bf16 fp8; do
  timeout 150 ncu --metrics gpu__time_duration.sum --csv --launch-skip 3000 --launch-count 800 build/biofm $E --precision $p --output /tmp/e/ncu_$p.safetensors > $OUT/ncu_embed_$p.csv 2> $OUT/ncu_embed_$p.err
  echo "ncu $p rc $?" >> $S; gzip $OUT/ncu_embed_$p.csv
done
cat $S
