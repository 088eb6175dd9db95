#!/usr/bin/env bash
# Session 30 device command D (one H200): where the Llama 1B bf16 step goes (issue 12's 60% MFU
# target; 56.5% in session 27), with 55bfd1d's binary: the recipe batch (2 windows x 4 micro
# batches of 8192 tokens) with the profiler's range times, then the two GEMM-side switches that
# were measured on the H100 only (session 24: wgrad_stream -0.5 to -1.2%; session 16:
# gemm_autotune -5%), each alternated with the default in this command.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 100 build/biofm bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //' | cut -c1-120)" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
}
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 16384 --max-seq-length 8192 --grad-acc 4 --steps 6 --warmup 2"
B llama_bf16_ranges $L profiler.range_times=true profiler.start_step=3 profiler.end_step=8
sed -n '/range times/,$p' /tmp/llama_bf16_ranges.log | head -40 >> $S
for i in 1 2; do
  B llama_bf16_default_$i $L
  B llama_bf16_wgrad_$i $L ops.wgrad_stream=true
  B llama_bf16_autotune_$i $L ops.gemm_autotune=true
done
tar czf $OUT/runD_logs.tgz -C /tmp $(cd /tmp && ls llama_*.json llama_*.log)
cat $S
