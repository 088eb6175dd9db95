#!/usr/bin/env bash
# Session 12 device command D: dense SDPA graphs only for power-of-two lengths; attention tests;
# Llama sanity training curve with ops.sdpa_dense on and off; Llama 1B bench dense vs ragged.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 120 build/tests/biofm_cuda_tests --gtest_filter="CudaAttention*:*Llama*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|tests ran" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -40 >> $S
for d in true false; do
  build/biofm train --config-name llama3_sanity num_train_steps=100 logger.frequency=1 output_dir=/tmp/run_dense_$d \
    checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false ops.sdpa_dense=$d > /tmp/train_$d.log 2>&1
  echo "train dense=$d rc $? $(grep -c loss /tmp/run_dense_$d/metrics.jsonl) lines" >> $S
done
python3 - >> $S <<'PY'
import json
def losses(d):
    out = {}
    for line in open(f"/tmp/run_dense_{d}/metrics.jsonl"):
        r = json.loads(line)
        if "train/loss" in r and "step" in r: out[r["step"]] = r["train/loss"]
    return out
a, b = losses("true"), losses("false")
steps = sorted(set(a) & set(b))
rel = [abs(a[s] - b[s]) / abs(b[s]) for s in steps]
print(f"llama3_sanity dense vs ragged: {len(steps)} steps, loss {a[steps[0]]:.4f}->{a[steps[-1]]:.4f} vs {b[steps[0]]:.4f}->{b[steps[-1]]:.4f}, "
      f"max rel diff {max(rel):.2e} (step {steps[rel.index(max(rel))]}), mean {sum(rel)/len(rel):.2e}")
PY
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192"
for rep in 1 2; do
  for d in true false; do
    B llama1b_bf16_1w_dense_${d}_$rep $L --tokens-per-batch 8192 --steps 20 --warmup 5 ops.sdpa_dense=$d
  done
done
for d in true false; do
  B llama1b_bf16_2x4_dense_$d $L --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2 ops.sdpa_dense=$d
done
tar czf $OUT/json.tgz -C /tmp $(cd /tmp && ls llama1b_*.json) run_dense_true/metrics.jsonl run_dense_false/metrics.jsonl
cat $S
