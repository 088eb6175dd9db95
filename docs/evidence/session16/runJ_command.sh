#!/usr/bin/env bash
# Session 16 device command J (H100): run I found 64 copies of one protein get different embeddings
# in one batch. Per-token states of layer 0 and 1 against the pooled ones: embedding or pooling?
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
head -400 /tmp/e/input.fasta > /tmp/e/in200.fasta
# One protein 64 times: every copy should get the same embedding.
python3 -c "
seq=open('/tmp/e/in200.fasta').read().split(chr(10))[1]
open('/tmp/e/same.fasta','w').write(''.join('>c%d\n%s\n' % (i, seq) for i in range(64)))"
E="embed --model /tmp/e/esm2_650M --precision fp32 --device cuda --input /tmp/e/same.fasta --max-tokens 16384"
build/biofm $E --layers 0 --per-token --output /tmp/t0.safetensors > /tmp/t0.log 2>&1; echo "t0 rc $?" >> $S
build/biofm $E --layers 0 --per-token --output /tmp/t0b.safetensors > /tmp/t0b.log 2>&1; echo "t0b rc $?" >> $S
build/biofm $E --layers 1 --per-token --output /tmp/t1.safetensors > /tmp/t1.log 2>&1; echo "t1 rc $?" >> $S
build/biofm $E --layers 0 --pooling cls --output /tmp/c0.safetensors > /tmp/c0.log 2>&1; echo "c0 rc $?" >> $S
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
for f in ['t0', 't0b', 't1']:
    d = load_file(f'/tmp/{f}.safetensors')
    te = [d[k] for k in d if k.startswith('token_embeddings')][0]; off = d['offsets']; pooled = [d[k] for k in d if k.startswith('embeddings')][0]
    L = off[1] - off[0]
    rows = np.stack([te[off[i]:off[i] + L] for i in range(len(off) - 1)])  # [64, L, H]
    dev = np.abs(rows - rows[0]).max(axis=(1, 2))
    print(f, 'tokens per copy', int(L), 'copies whose token states differ from copy 0:', int((dev > 0).sum()), 'max', float(dev.max()),
          '| pooled spread', float(np.abs(pooled - pooled[0]).max()),
          '| pooled vs mean of its own token rows (residues)', float(np.abs(pooled - rows[:, 1:-1].mean(1)).max()))
pick = lambda f, p: [v for k, v in load_file(f).items() if k.startswith(p)][0]
a = pick('/tmp/t0.safetensors', 'token_embeddings'); b = pick('/tmp/t0b.safetensors', 'token_embeddings')
print('t0 vs t0b token states max abs', float(np.abs(a - b).max()))
c = pick('/tmp/c0.safetensors', 'embeddings')
print('cls layer 0 spread', float(np.abs(c - c[0]).max()))
PY
cat $S
