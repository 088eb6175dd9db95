#!/usr/bin/env bash
# Session 16 device command L (H100): after a robustness edit of the graphs-built-ahead wait loop
# (the waiter drops a finished key; a builder without a cuDNN handle leaves the build to the first
# pass): the attention, embedding and checkpoint CUDA tests; embed of 4,000 proteins twice (same bits).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt; date -u > $S
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaAttention*:CudaEmbedding*:CudaCheckpoint*:CudaInfer*:CudaGemm.Tuning*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -40 >> $S
python3 - <<'PY'
import sys, gzip, os
sys.path.insert(0, 'bench')
import torch
from hf_peer_bench import build_esm
torch.manual_seed(0)
m, _ = build_esm('650M'); m.save_pretrained('/tmp/e/esm2_650M')
out = open('/tmp/e/input.fasta', 'w'); n = 0; name = None; seq = []
for line in gzip.open('.carry/data/uniprot_20k.fasta.gz', 'rt'):
    if line.startswith('>'):
        if name is not None:
            out.write('>' + name + '\n' + ''.join(seq)[:1022] + '\n'); n += 1
            if n == 4000: break
        name, seq = line[1:].split()[0], []
    else:
        seq.append(line.strip())
PY
E="embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --device cuda --max-tokens 16384 --precision bf16"
for r in 1 2; do build/biofm $E --output /tmp/r$r.safetensors > /tmp/r$r.log 2>&1; echo "run $r $(grep 'records in' /tmp/r$r.log | sed 's/.*|//')" >> $S; done
cmp /tmp/r1.safetensors /tmp/r2.safetensors && echo "embed outputs: identical files" >> $S
cat $S
