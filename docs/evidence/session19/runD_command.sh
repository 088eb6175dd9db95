#!/usr/bin/env bash
# Session 19 device command D (H100), binaries of f323ab5 (embed reads its input a piece at a
# time): embed_vs_hf.sh (HF bf16 vs biofm bf16 and fp32, 4,000 UniProt proteins, ESM-2 650M
# shape), then biofm bf16 twice more on the same proteins; ESM-2 650M FP8 and Llama 1B bf16
# (recipe batch) benches with the GPU monitor.
set -u
mkdir -p build/tests $OUT /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
rm -rf /tmp/e2; timeout 260 bash bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e2 > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -7 $OUT/embed_vs_hf.txt >> $S
E="embed --model /tmp/e2/esm2_650M --device cuda --max-tokens 16384 --input /tmp/e2/input.fasta"
for r in 1 2; do
  timeout 60 build/biofm $E --output /tmp/e/bf16_$r.safetensors > /tmp/e/bf16_$r.log 2>&1
  echo "biofm bf16 again, run $r rc $? $(grep 'records in' /tmp/e/bf16_$r.log | sed 's/.*|//')" >> $S
done
D=.carry/data
B() {  # name, args...
  local name=$1; shift
  timeout 120 build/biofm bench "$@" > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //; s/biofm llama3_1b: //')" >> $S
  grep "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
B esm650_fp8 --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 --fp8
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B llama1b_bf16 --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2
tar czf $OUT/logs.tgz /tmp/e/*.log /tmp/*.log 2>/dev/null
cat $S
