#!/usr/bin/env bash
# Session 18 device command A (H100): how busy is the GPU? For training steps (ESM-2 650M bf16
# and FP8, Llama 1B bf16) and for `embed`: the wall time of a step (bench, no profiler) against
# the sum of its kernels' durations (ncu, gpu__time_duration, clocks and caches left alone,
# a window of 3 steps bracketed by cudaProfilerStart/Stop). Their difference is GPU idle time
# (launch gaps, host syncs, host work not overlapped).
set -u
mkdir -p build $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/bench
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv --print-units base"
sumcsv() { python3 - "$1" "$2" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"'))]
ns = sum(float(r["Metric Value"].replace(",", "")) for r in rows if r["Metric Name"] == "gpu__time_duration.sum")
div = float(sys.argv[2])
print(f"kernels {len(rows)}, kernel time {ns/1e6:.2f} ms, per unit {ns/1e6/div:.2f} ms")
PY
}
D=.carry/data
run_bench() {  # name, timed steps, warmup, profiled window "first last", args...
  local name=$1 steps=$2 warm=$3 first=$4 last=$5; shift 5
  timeout 200 build/biofm bench "$@" --steps $steps --warmup $warm --json $OUT/$name.json > $OUT/$name.log 2>&1
  echo "$name bench rc $? $(grep -E 'tokens/s' $OUT/$name.log | tail -1)" >> $S
  timeout 200 $NCU --profile-from-start off build/biofm bench "$@" --steps 2 --warmup $((last)) profiler.start_step=$first profiler.end_step=$last > $OUT/${name}_ncu.csv 2> $OUT/${name}_ncu.err
  echo "$name ncu rc $? $(sumcsv $OUT/${name}_ncu.csv $((last - first + 1))) (per step)" >> $S
  gzip -f $OUT/${name}_ncu.csv
}
run_bench esm650_bf16 20 8 8 10 --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384
run_bench esm650_fp8 20 8 8 10 --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --fp8
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
run_bench llama1b_bf16 6 2 3 3 --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4
python3 - <<'PY' >> $S 2>&1
import gzip, torch
from hf_peer_bench import build_esm
torch.manual_seed(0)
model, dims = build_esm("650M")
model.save_pretrained("/tmp/e/esm2_650M")
for lim, name in ((4000, "in"), (600, "in600")):
    n = 0
    with gzip.open(".carry/data/uniprot_20k.fasta.gz", "rt") as f, open(f"/tmp/e/{name}.fasta", "w") as o:
        for line in f:
            if line.startswith(">"):
                n += 1
                if n > lim: break
            o.write(line)
PY
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384"
for r in 1 2; do
  build/biofm $E --input /tmp/e/in.fasta --output /tmp/e/o.safetensors > /tmp/e/l.log 2>&1
  echo "embed 4000 bf16 rc $? $(grep 'records in' /tmp/e/l.log | sed 's/.*|//')" >> $S
  build/biofm $E --input /tmp/e/in600.fasta --output /tmp/e/o6.safetensors > /tmp/e/l.log 2>&1
  echo "embed 600 bf16 rc $? $(grep 'records in' /tmp/e/l.log | sed 's/.*|//')" >> $S
done
timeout 240 $NCU build/biofm $E --input /tmp/e/in600.fasta --output /tmp/e/o6n.safetensors > $OUT/embed600_ncu.csv 2> $OUT/embed600_ncu.err
echo "embed 600 ncu rc $? $(sumcsv $OUT/embed600_ncu.csv 1) (whole process)" >> $S
gzip -f $OUT/embed600_ncu.csv
cat $S
