#!/usr/bin/env bash
# Session 27 device command A (one H200): the whole CUDA suite of adfb359 (the amax folded into
# the history slot by the producers of codes; the attention output's amax inside its
# quantization; session 26's side-stream memory bound under recompute, never run on a GPU), then
# ESM-2 650M FP8 DelayedScaling alternating adfb359 (new) and ae578de (old, session 26's final
# binary), three runs each, then Llama 1B FP8 DelayedScaling (one window) new / old.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_old.xz > build/biofm_old && chmod +x build/biofm_old
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
timeout 260 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 80 build/$bin bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //')" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 --fp8 fp8_config.fp8_recipe=DelayedScaling"
for i in 1 2 3; do
  B esm_fp8_new_$i biofm $E
  B esm_fp8_old_$i biofm_old $E
done
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 8192 --max-seq-length 8192 --steps 10 --warmup 3 --fp8 fp8_config.fp8_recipe=DelayedScaling"
B llama_fp8_new biofm $L
B llama_fp8_old biofm_old $L
tail -c 20000 /tmp/cuda_tests.log > /tmp/cuda_tests_tail.log
tar czf $OUT/runA_logs.tgz -C /tmp cuda_tests_tail.log $(cd /tmp && ls esm_*.json llama_*.json esm_*.log llama_*.log 2>/dev/null)
cat $S
