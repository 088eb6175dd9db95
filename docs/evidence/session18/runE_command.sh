#!/usr/bin/env bash
# Session 18 device command E (H100): the final binaries after the review. CUDA suite (the new
# fp8_dequantize_transposed op in the backend-ops harness, the released-inputs test on ESM-2 and
# Llama, the GPU monitor); then ESM-2 650M FP8 and Llama 1B FP8 with the inputs released and
# kept, alternating, and ESM-2 650M bf16, with the GPU's clock and power.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 320 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|fp8 release inputs|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
B() {  # name, args...
  local name=$1; shift
  timeout 150 build/biofm bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //; s/biofm llama3_1b: //')" >> $S
  grep "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
B esm650_fp8_release $E --fp8
B esm650_fp8_keep $E --fp8 ops.fp8_release_inputs=false
B llama1b_fp8_release $L --fp8
B llama1b_fp8_keep $L --fp8 ops.fp8_release_inputs=false
B esm650_bf16 $E
python3 -c "import json; print('bench json gpu:', json.load(open('/tmp/esm650_bf16.json')).get('gpu'))" >> $S
tar czf $OUT/logs.tgz /tmp/cuda_tests.log /tmp/*.log /tmp/*.json 2>/dev/null
cat $S
