#!/usr/bin/env bash
# Session 18 device command K (H100): does a smaller activation footprint speed up Llama 1B bf16
# as it did FP8 (run D: -7 GiB, +3-4%)? "Lean" layers (recompute on, 0 layers fully
# recomputed: the norms' outputs and the SwiGLU activation dropped and redone in backward)
# against keeping everything, alternating, recipe batch (2 windows x 4).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
B() { local name=$1; shift; timeout 100 build/biofm bench "$@" > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm llama3_1b: //')" >> $S
  grep "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S; }
B keep_1 $L
B lean_1 $L --recompute --recompute-layers 0
B keep_2 $L
B lean_2 $L --recompute --recompute-layers 0
cat $S
