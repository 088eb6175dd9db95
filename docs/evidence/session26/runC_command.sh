#!/usr/bin/env bash
# Session 26 device command C (nvidia-h200-x2): option probes on the H200, no code change (main,
# 4814b00). GPU 0: Llama 1B bf16 at the recipe batch (2 windows x 4 micro batches), alternating
# the config's defaults with ops.wgrad_stream=true and ops.sdpa_autotune=true. GPU 1: ESM-2 650M
# FP8 DelayedScaling and bf16 with and without ops.sdpa_autotune (cuDNN engine autotuning per
# attention graph), then the side-stream test alone (run B ran it beside the two-GPU check).
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=8
D=.carry/data
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B() {  # gpu, name, extra args...
  local g=$1 name=$2; shift 2
  CUDA_VISIBLE_DEVICES=$g timeout 100 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> /tmp/s$g
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> /tmp/s$g
}
L="--model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 16384 --max-seq-length 8192 --grad-acc 4 --steps 6 --warmup 2"
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
(
  B 0 llama_base_1 $L
  B 0 llama_wgrad_1 $L ops.wgrad_stream=true
  B 0 llama_autotune_1 $L ops.sdpa_autotune=true
  B 0 llama_base_2 $L
  B 0 llama_wgrad_2 $L ops.wgrad_stream=true
) &
(
  B 1 esm_fp8_base_1 $E --fp8 fp8_config.fp8_recipe=DelayedScaling
  B 1 esm_fp8_autotune_1 $E --fp8 fp8_config.fp8_recipe=DelayedScaling ops.sdpa_autotune=true
  B 1 esm_fp8_base_2 $E --fp8 fp8_config.fp8_recipe=DelayedScaling
  B 1 esm_fp8_autotune_2 $E --fp8 fp8_config.fp8_recipe=DelayedScaling ops.sdpa_autotune=true
  B 1 esm_bf16_autotune $E ops.sdpa_autotune=true
  B 1 esm_bf16_base $E
  CUDA_VISIBLE_DEVICES=1 timeout 60 build/tests/biofm_cuda_tests --gtest_filter='CudaSideStream.*' > /tmp/side.log 2>&1
  echo "side-stream tests alone rc $?" >> /tmp/s1
  grep -E "^\[  PASSED|^\[  FAILED|\[side stream\]|Failure|actual" /tmp/side.log >> /tmp/s1
) &
wait
{ date -u; echo "== GPU 0"; cat /tmp/s0; echo "== GPU 1"; cat /tmp/s1; } > $OUT/summary.txt
cat $OUT/summary.txt
