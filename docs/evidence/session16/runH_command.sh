#!/usr/bin/env bash
# Session 16 device command H (H100): run G found embeddings differ run to run even in fp32 and
# with every op option. At which layer do two runs first differ (200 proteins, fp32 and bf16)?
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
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 --layers 0,1,2,3,4,8,16,32,33"
for tag in fp32 bf16; do
  for r in 1 2; do build/biofm $E --input /tmp/e/in200.fasta --precision $tag --output /tmp/L_${tag}_$r.safetensors > /tmp/L_${tag}_$r.log 2>&1; echo "$tag $r rc $?" >> $S; done
done
for r in 1 2; do build/biofm $E --input /tmp/e/input.fasta --precision fp32 --output /tmp/A_$r.safetensors > /tmp/A_$r.log 2>&1; echo "all4000 fp32 $r rc $?" >> $S; done
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
for pre in ['L_fp32', 'L_bf16', 'A']:
    a = load_file(f'/tmp/{pre}_1.safetensors'); b = load_file(f'/tmp/{pre}_2.safetensors')
    for k in sorted(a, key=lambda s: int(s.split('.')[-1]) if s.split('.')[-1].isdigit() else -1):
        if not k.startswith('embeddings'): continue
        d = np.abs(a[k] - b[k]).max(1)
        print(pre, k, 'records differing', int((d > 0).sum()), 'of', len(d), 'max abs', float(d.max()),
              'median of differing', float(np.median(d[d > 0])) if (d > 0).any() else 0.0, 'mean |x|', float(np.abs(a[k]).mean()))
PY
cat $S
