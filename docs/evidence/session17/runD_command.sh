#!/usr/bin/env bash
# Session 17 device command D (H100): `--precision fp8` through `score` (pseudo-log-likelihoods)
# and `eval` (masked-LM loss) on the ESM-2 650M shape (random weights, HF save_pretrained), next to
# bf16 and fp32: the FP8 forward runs in every inference command, and how far it moves the numbers.
# First the CUDA tests of inference, FP8 and the backend ops (inference weights now get FP8 codes
# without the transposed copy); then embed fp8 / bf16 alternating with peak GPU memory.
set -u
mkdir -p build $OUT /tmp/e
mkdir -p build/tests
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/bench
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt; { date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 200 build/tests/biofm_cuda_tests --gtest_filter="CudaInfer.*:*Fp8*:BackendOps.*:CudaCheckpoint.*" > $OUT/tests.log 2>&1
echo "tests rc $?" >> $S
grep -E "fp8 embeddings|backend ops:|^\[  PASSED|^\[  FAILED|Failure" -A2 $OUT/tests.log | head -30 >> $S
python3 - <<'PY' >> $S 2>&1
import gzip, torch
from hf_peer_bench import build_esm
torch.manual_seed(0)
model, dims = build_esm("650M")
model.save_pretrained("/tmp/e/esm2_650M")
n = 0
with gzip.open(".carry/data/uniprot_20k.fasta.gz", "rt") as f, open("/tmp/e/in.fasta", "w") as o, \
        open("/tmp/e/in4000.fasta", "w") as o4:
    for line in f:
        if line.startswith(">"):
            n += 1
            if n > 4000: break
        if n <= 300: o.write(line)
        o4.write(line)
recs = open("/tmp/e/in.fasta").read().split(">")[1:41]
open("/tmp/e/in40.fasta", "w").write("".join(">" + r for r in recs))
PY
M="--model /tmp/e/esm2_650M --device cuda"
for p in fp32 bf16 fp8; do
  t0=$(date +%s.%N); build/biofm score $M --precision $p --input /tmp/e/in40.fasta --max-seq-length 128 --output /tmp/e/pll_$p.tsv > /tmp/e/score_$p.log 2>&1
  rc=$?; echo "score $p rc $rc $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s $(tail -1 /tmp/e/score_$p.log)" >> $S
  build/biofm eval $M --precision $p --input /tmp/e/in.fasta --output /tmp/e/eval_$p.json > /dev/null 2> /tmp/e/eval_$p.err
  echo "eval $p rc $? $(python3 -c "import json; d=json.load(open('/tmp/e/eval_$p.json')); print({k: d[k] for k in d if k in ('loss','accuracy','perplexity','precision')})")" >> $S
done
python3 - >> $S <<'PY'
import csv
def pll(p):
    return {r['name']: float(r['mean_pll']) for r in csv.DictReader(open(f'/tmp/e/pll_{p}.tsv'), delimiter='\t')}
ref = pll('fp32')
for p in ['bf16', 'fp8']:
    x = pll(p)
    d = [abs(x[k] - ref[k]) for k in ref]
    print(f'score {p} vs fp32: {len(d)} sequences, mean_pll max abs diff {max(d):.4g}, mean abs diff {sum(d)/len(d):.4g}')
PY
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 --input /tmp/e/in4000.fasta"
for r in 1 2; do for p in fp8 bf16; do
  build/biofm $E --precision $p --output /tmp/e/emb_$p$r.safetensors > /tmp/e/emb_$p$r.log 2>&1 &
  pid=$!; peak=0
  while kill -0 $pid 2>/dev/null; do m=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1); [ "$m" -gt "$peak" ] && peak=$m; sleep 0.2; done
  wait $pid; echo "embed $p run $r rc $? peak GPU memory ${peak} MiB $(grep 'records in' /tmp/e/emb_$p$r.log | sed 's/.*|//')" >> $S
done; done
cp /tmp/e/*.json /tmp/e/*.log $OUT/ 2>/dev/null
cat $S
