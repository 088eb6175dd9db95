#!/usr/bin/env bash
# Session 16 device command F (H100): are embeddings the same bits run to run, and between
# dee9337 (graphs built on first use) and the new binary (graphs built ahead)? Which records differ?
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
E="embed --model /tmp/e/esm2_650M --input /tmp/e/input.fasta --device cuda --max-tokens 16384 --precision bf16"
/tmp/biofm_prev $E --output /tmp/p1.safetensors > /tmp/p1.log 2>&1; echo "p1 rc $?" >> $S
/tmp/biofm_prev $E --output /tmp/p2.safetensors > /tmp/p2.log 2>&1; echo "p2 rc $?" >> $S
build/biofm $E --output /tmp/n1.safetensors > /tmp/n1.log 2>&1; echo "n1 rc $?" >> $S
build/biofm $E --output /tmp/n2.safetensors > /tmp/n2.log 2>&1; echo "n2 rc $?" >> $S
build/biofm $E --output /tmp/n3.safetensors --ops attention_verbose=true > /tmp/n3.log 2>&1; echo "n3 rc $?" >> $S
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
E = {k: load_file(f'/tmp/{k}.safetensors')['embeddings'] for k in ['p1', 'p2', 'n1', 'n2', 'n3']}
lens = []
for line in open('/tmp/e/input.fasta'):
    if not line.startswith('>'): lens.append(len(line.strip()) + 2)
lens = np.array(lens)
for a, b in [('p1', 'p2'), ('n1', 'n2'), ('n1', 'n3'), ('p1', 'n1')]:
    d = np.abs(E[a] - E[b]).max(1)
    bad = np.nonzero(d > 0)[0]
    print(a, b, 'records differing', len(bad), 'max abs', float(d.max()),
          'lengths of differing (min/max)', (int(lens[bad].min()), int(lens[bad].max())) if len(bad) else None)
PY
cat $S
