#!/usr/bin/env bash
# Session 18 device command C (H100): (1) CUDA suite: FP8 layers drop their bf16 inputs after
# forward when the FP8 codes serve backward (ops.fp8_release_inputs), the GPU monitor (NVML);
# (2) ESM-2 650M benches, now with the GPU's clock and power over the timed steps: FP8 current
# and delayed scaling with the inputs released and kept (peak memory, tokens/s), bf16;
# Llama 1B FP8.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|fp8 release inputs" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B() {  # name, args...
  local name=$1; shift
  timeout 150 build/biofm bench "$@" > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //; s/biofm llama3_1b: //')" >> $S
  grep "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
B fp8_current_release $E --fp8
B fp8_current_keep $E --fp8 ops.fp8_release_inputs=false
B fp8_delayed_release $E --fp8 fp8_config.fp8_recipe=DelayedScaling
B fp8_delayed_keep $E --fp8 fp8_config.fp8_recipe=DelayedScaling ops.fp8_release_inputs=false
B fp8_current_release_2 $E --fp8
B fp8_current_keep_2 $E --fp8 ops.fp8_release_inputs=false
B bf16 $E
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B llama1b_fp8 --model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2 --fp8
tar czf $OUT/logs.tgz /tmp/cuda_tests.log /tmp/*.log 2>/dev/null
cat $S
