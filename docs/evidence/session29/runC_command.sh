#!/usr/bin/env bash
# Session 29 device command C (one H200): 3752082 (new: the FP8 GELU quantization's arithmetic
# emitted once, NaN-propagating min/max clamps in the GPU erf) against d684181 (old: session 28's
# final CUDA code). First the probe (bench/fp8_gelu_pipeline_probe.cu, now linked against the new
# library: its "library" rows are the new kernel, its "copy (no flag)" rows the old arithmetic),
# then ESM-2 650M end to end, alternating new and old in one command: FP8 DelayedScaling three
# times each, bf16 and FP8 current scaling once each (their GELU kernels use the same erf).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_old.xz > build/biofm_old && chmod +x build/biofm_old
xz -dc .carry/pack/fp8_gelu_pipeline_probe.xz > /tmp/probe && chmod +x /tmp/probe
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
timeout 90 /tmp/probe 50 > $OUT/probe.txt 2>&1
echo "probe rc $?" >> $S
sed -n '/^arithmetic variants/,$p' $OUT/probe.txt | grep -E "^[a-z]|DIFFER|library|copy|min/max clamps  " >> $S
D=.carry/data
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 75 build/$bin bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
  grep -E "mlp|MLP" /tmp/$name.log | head -4 | cut -c1-120 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 profiler.range_times=true profiler.start_step=10 profiler.end_step=20"
for i in 1 2 3; do
  B esm_fp8d_new_$i biofm $E --fp8 fp8_config.fp8_recipe=DelayedScaling
  B esm_fp8d_old_$i biofm_old $E --fp8 fp8_config.fp8_recipe=DelayedScaling
done
B esm_bf16_new biofm $E
B esm_bf16_old biofm_old $E
B esm_fp8c_new biofm $E --fp8
B esm_fp8c_old biofm_old $E --fp8
tar czf $OUT/runC_logs.tgz -C /tmp $(cd /tmp && ls esm_*.json esm_*.log 2>/dev/null)
cat $S
