#!/usr/bin/env bash
# Session 16 device command K (H100): the token-dropout row-scaling race fixed (threads per row a
# power of two). CUDA suite; 64 copies of one protein embedded in one batch (fp32, bf16) must agree;
# two runs of 4,000 proteins must give the same bits; embed_vs_hf.sh; ESM-2 650M bf16 / FP8 bench.
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
rm -rf /tmp/e2; timeout 200 bash bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e2 > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -6 $OUT/embed_vs_hf.txt >> $S
python3 -c "
seq=[l.strip() for l in open('/tmp/e2/input.fasta')][1]
open('/tmp/e/same.fasta','w').write(''.join('>c%d\n%s\n' % (i, seq) for i in range(64)))"
E="embed --model /tmp/e2/esm2_650M --device cuda --max-tokens 16384"
for p in fp32 bf16; do build/biofm $E --precision $p --input /tmp/e/same.fasta --output /tmp/same_$p.safetensors > /dev/null 2>&1; echo "same $p rc $?" >> $S; done
for r in 1 2; do build/biofm $E --precision bf16 --input /tmp/e2/input.fasta --output /tmp/r$r.safetensors > /tmp/r$r.log 2>&1; echo "run $r $(grep 'records in' /tmp/r$r.log | sed 's/.*|//')" >> $S; done
python3 - >> $S <<'PY'
from safetensors.numpy import load_file
import numpy as np
for p in ['fp32', 'bf16']:
    s = load_file(f'/tmp/same_{p}.safetensors')['embeddings']
    print('64 copies of one protein', p, ': max abs spread', float(np.abs(s - s[0]).max()))
a = load_file('/tmp/r1.safetensors')['embeddings']; b = load_file('/tmp/r2.safetensors')['embeddings']
print('4000 proteins bf16, run 1 vs 2: records differing', int((np.abs(a - b).max(1) > 0).sum()), 'max abs', float(np.abs(a - b).max()))
PY
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm650_bf16 $E; B esm650_fp8 $E --fp8
gzip $OUT/bench_logs.txt
cat $S
