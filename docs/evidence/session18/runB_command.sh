#!/usr/bin/env bash
# Session 18 device command B (H100): (1) CUDA suite (one cuDNN call-shape builder for the passes
# and the graphs built ahead; pooled embed results read back asynchronously while the next batch
# runs); (2) embed, 4,000 proteins, bf16: the previous binary against this one, alternating;
# (3) SM clock and power during ESM-2 650M and Llama 1B training benches (nvidia-smi every 100 ms):
# is the step power-limited (command A's kernel sums at free clocks were 5.5% / 22% below the
# steps' wall time)?
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_old.xz > /tmp/biofm_old && chmod +x /tmp/biofm_old
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/bench
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
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
for r in 1 2 3; do for b in /tmp/biofm_old build/biofm; do
  $b $E --output /tmp/e/o_$r.safetensors > /tmp/e/l.log 2>&1
  echo "embed $b rc $? $(grep 'records in' /tmp/e/l.log | sed 's/.*|//')" >> $S
done; done
python3 -c "
from safetensors.numpy import load_file
a = load_file('/tmp/e/o_3.safetensors')['embeddings']; b = load_file('/tmp/e/o_2.safetensors')['embeddings']
print('embed new run 3 vs new run 2 identical:', bool((a == b).all()))" >> $S 2>&1
D=.carry/data
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
clocked() {  # name, bench args...
  local name=$1; shift
  nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader,nounits -lms 100 > /tmp/smi_$name.csv 2>&1 &
  local smi=$!
  timeout 200 build/biofm bench "$@" > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1)" >> $S
  kill $smi; sleep 0.5
  python3 - /tmp/smi_$name.csv <<'PY' >> $S 2>&1
import sys, statistics, collections
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") >= 3]
busy = [r for r in rows if float(r[2]) > 250]  # samples under load
clk = [float(r[1]) for r in busy]; pw = [float(r[2]) for r in busy]
tmp = [float(r[3]) for r in busy]
print(f"  samples under load {len(busy)}: SM clock median {statistics.median(clk):.0f} MHz (min {min(clk):.0f}, max {max(clk):.0f}), "
      f"power median {statistics.median(pw):.0f} W (max {max(pw):.0f}); temperature max {max(tmp):.0f} C")
PY
}
clocked esm650_bf16 --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 30 --warmup 8
clocked esm650_fp8 --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 30 --warmup 8 --fp8
clocked llama1b_bf16 --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 8 --warmup 2
tar czf $OUT/logs.tgz /tmp/cuda_tests.log /tmp/smi_*.csv /tmp/*.log 2>/dev/null
cat $S
