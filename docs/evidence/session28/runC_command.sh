#!/usr/bin/env bash
# Session 28 device command C (one H200; the binaries of run B): the OpenGenome2 7B shape (one
# 8192-token window per step, recompute) with and without fp8_dpa, under DelayedScaling and
# Float8CurrentScaling, alternating, with the per-range timer over steps 6-10 (sdpa forward and
# backward per step: the attention kernels with their quantizations).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 140 build/biofm bench "$@" output_dir=/tmp/rt_$name --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during|note: fp8_dpa|error" /tmp/$name.log | cut -c1-160 | sed 's/^/    /' >> $S
  grep -iE "sdpa|^ *step|forward  |backward  " /tmp/$name.log | head -12 | sed 's/^/    /' >> $S
}
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 7B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 8192 --recompute --steps 12 --warmup 4 --fp8 profiler.range_times=true profiler.start_step=6 profiler.end_step=10"
B og2_7b_delayed_dpa $L fp8_config.fp8_recipe=DelayedScaling fp8_config.fp8_recipe_kwargs.fp8_dpa=true
B og2_7b_delayed $L fp8_config.fp8_recipe=DelayedScaling
B og2_7b_current_dpa $L fp8_config.fp8_recipe_kwargs.fp8_dpa=true
B og2_7b_current $L
tar czf $OUT/runC_logs.tgz -C /tmp $(cd /tmp && ls og2_*.json og2_*.log 2>/dev/null) $(cd /tmp && ls -d rt_og2_* 2>/dev/null)
cat $S
