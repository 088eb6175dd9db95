#!/usr/bin/env bash
# Session 32 device command C (one H200): the whole CUDA suite on 06114c1, the final code (walkthrough D's
# CLI and report fixes merged after run B), and ESM-2 650M FP8 DelayedScaling (the issue-12 command)
# and bf16, and Llama 1B bf16 at the recipe batch, on it. Logs packed in one tarball.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; echo "code 06114c1"; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
timeout 330 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|adamw ahead\]" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 30000 /tmp/cuda_tests.log > /tmp/runC_cuda_tests_tail.log
D=.carry/data
B() {  # name, extra args...
  local name=$1; shift
  timeout 75 build/biofm bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm_fp8_delayed $E --fp8 fp8_config.fp8_recipe=DelayedScaling
B esm_bf16 $E
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
B llama_1B_recipe --model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 16384 --max-seq-length 8192 --grad-acc 4 --steps 6 --warmup 2
cd /tmp && tar czf $OUT/runC_logs.tgz runC_cuda_tests_tail.log esm_*.json esm_*.log llama_*.json llama_*.log
cat $S
