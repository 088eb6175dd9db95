#!/usr/bin/env bash
# Session 17 device command G (H100): the final binaries. Whole CUDA suite (the review fixes:
# backend-ops atomic-output exemptions, forward-only FP8 weight codes test, the fp8 capability
# check in --precision parsing); then embed --precision fp8 and bf16 on 4,000 proteins.
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/bench
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 330 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|fp8 embeddings" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
python3 - <<'PY' >> $S 2>&1
import gzip, torch
from hf_peer_bench import build_esm
torch.manual_seed(0)
model, dims = build_esm("650M")
model.save_pretrained("/tmp/e/esm2_650M")
n = 0
with gzip.open(".carry/data/uniprot_20k.fasta.gz", "rt") as f, open("/tmp/e/in.fasta", "w") as o:
    for line in f:
        if line.startswith(">"):
            n += 1
            if n > 4000: break
        o.write(line)
PY
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 --input /tmp/e/in.fasta"
for p in fp8 bf16 fp8 bf16; do
  build/biofm $E --precision $p --output /tmp/e/o_$p.safetensors > /tmp/e/l.log 2>&1
  echo "embed $p rc $? $(grep 'records in' /tmp/e/l.log | sed 's/.*|//')" >> $S
done
cat $S
