#!/usr/bin/env bash
# Session 16 device command I (H100): run H found embeddings differ run to run from layer 0 on, in fp32.
# Host/device race (CUDA_LAUNCH_BLOCKING=1)? Batch size? Copies of one protein? Against the CPU?
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
E="embed --model /tmp/e/esm2_650M --precision fp32"; G="--device cuda"
for v in "plain:" "blocking:CUDA_LAUNCH_BLOCKING=1" ; do
  tag=${v%%:*}; envs=${v#*:}
  for r in 1 2; do env $envs build/biofm $E $G --input /tmp/e/in200.fasta --max-tokens 16384 --output /tmp/${tag}_$r.safetensors > /tmp/${tag}_$r.log 2>&1; echo "$tag $r rc $?" >> $S; done
done
for r in 1 2; do build/biofm $E $G --input /tmp/e/in200.fasta --max-tokens 1100 --output /tmp/small_$r.safetensors > /tmp/small_$r.log 2>&1; echo "small $r rc $?" >> $S; done
build/biofm $E $G --input /tmp/e/same.fasta --max-tokens 16384 --output /tmp/same.safetensors > /tmp/same.log 2>&1; echo "same rc $?" >> $S
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
L = lambda f: load_file(f)['embeddings']
for tag in ['plain', 'blocking', 'small']:
    a, b = L(f'/tmp/{tag}_1.safetensors'), L(f'/tmp/{tag}_2.safetensors')
    d = np.abs(a - b).max(1)
    print(tag, 'run 1 vs 2: records differing', int((d > 0).sum()), 'max abs', float(d.max()))
s = L('/tmp/same.safetensors')
print('64 copies of one protein: max abs spread', float(np.abs(s - s[0]).max()), 'rows differing from row 0', int((np.abs(s - s[0]).max(1) > 0).sum()))
PY
cat $S
