#!/usr/bin/env bash
# Session 16 device command E (H100): attention graphs built ahead for inference (embed / score /
# eval announce their batches; cuDNN graphs built on threads of their own). CUDA suite; biofm embed
# of 4,000 proteins alternating against dee9337 (graphs built on first use); one verbose run;
# then embed_vs_hf.sh with the new binary on the warm machine.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_dee9337.xz > /tmp/biofm_prev && chmod +x /tmp/biofm_prev
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}  # Gloo and its libraries (not on the GPU machine)
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
# The model directory and input of embed_vs_hf (HF save_pretrained), without timing HF yet.
python3 - <<'PY'
import sys, os, gzip
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
for r in 1 2 3; do
  /tmp/biofm_prev $E --output /tmp/p.safetensors > /tmp/p.log 2>&1; echo "prev_$r $(grep 'records in' /tmp/p.log | sed 's/.*|//')" >> $S
  build/biofm $E --output /tmp/n.safetensors > /tmp/n.log 2>&1; echo "new_$r $(grep 'records in' /tmp/n.log | sed 's/.*|//')" >> $S
done
python3 -c "
from safetensors.numpy import load_file; import numpy as np
a=load_file('/tmp/p.safetensors')['embeddings']; b=load_file('/tmp/n.safetensors')['embeddings']
print('prev vs new embeddings: max abs diff', float(np.abs(a-b).max()))" >> $S
build/biofm $E --output /tmp/v.safetensors --ops attention_verbose=true > $OUT/embed_verbose.log 2>&1
grep "built cuDNN" $OUT/embed_verbose.log >> $S; grep "records in" $OUT/embed_verbose.log | sed 's/.*|//' >> $S
rm -rf /tmp/e2; timeout 240 bash bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e2 > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -6 $OUT/embed_vs_hf.txt >> $S
cat $S
