#!/usr/bin/env bash
# Session 16 device command G (H100): run F found biofm embed's bf16 embeddings differ run to run
# (both binaries). Which part is not deterministic? Two runs each: default, fallback attention,
# unfused GELU, separate q/k/v, fp32.
set -u
mkdir -p build $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_dee9337.xz > /tmp/biofm_prev && chmod +x /tmp/biofm_prev
S=$OUT/summary.txt; date -u > $S
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
python3 - <<'PY'
import sys, gzip
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
E="embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --device cuda --max-tokens 16384"
for v in "default:--precision bf16" "fallback:--precision bf16 --ops attention=fallback" "unfused:--precision bf16 --ops gemm_fused_gelu=false" "unpacked:--precision bf16 --ops attention_packed_qkv=false" "fp32:--precision fp32"; do
  tag=${v%%:*}; ops=${v#*:}
  for r in 1 2; do build/biofm $E $ops --output /tmp/${tag}_$r.safetensors > /tmp/${tag}_$r.log 2>&1; echo "$tag $r rc $? $(grep 'records in' /tmp/${tag}_$r.log | sed 's/.*|//')" >> $S; done
done
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
for tag in ['default', 'fallback', 'unfused', 'unpacked', 'fp32']:
    a = load_file(f'/tmp/{tag}_1.safetensors')['embeddings']; b = load_file(f'/tmp/{tag}_2.safetensors')['embeddings']
    d = np.abs(a - b).max(1)
    print(tag, 'run 1 vs 2: records differing', int((d > 0).sum()), 'max abs', float(d.max()), 'mean |x|', float(np.abs(a).mean()))
PY
cat $S
