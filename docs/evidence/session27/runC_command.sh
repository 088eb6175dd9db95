#!/usr/bin/env bash
# Session 27 device command C (one H200): the whole CUDA suite of the rope-codes commit (the
# q|k|v gradient's inverse rotation inside its quantization; the rope kernels' arithmetic now
# shared and written out with explicit fmaf), then ESM-2 650M FP8 DelayedScaling alternating
# the new binary, adfb359 (run A's new: the amax folds) and ae578de (session 26's final), Llama
# 1B FP8 DelayedScaling new / adfb359, ESM-2 650M bf16 new / ae578de, and the forward GEMMs of
# ESM-2 650M alone (bench/gemm_algos_bench.cpp, built here) for embed's roofline.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
for b in biofm biofm_prev biofm_old; do xz -dc .carry/pack/$b.xz > build/$b && chmod +x build/$b; done
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
( g++ -std=c++20 -O2 -I/usr/local/cuda/include bench/gemm_algos_bench.cpp -L/usr/local/cuda/lib64 -lcublasLt -lcudart \
    -o /tmp/gemm_algos_bench > /tmp/gemm_build.log 2>&1 ) &
timeout 240 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -E "RopeGrad|BackendOps" /tmp/cuda_tests.log | grep -E "OK|FAILED" >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
B() {  # name, binary, extra args...
  local name=$1 bin=$2; shift 2
  timeout 70 build/$bin bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm [a-z0-9_]*: //' | cut -c1-90)" >> $S
  grep -E "GPU during" /tmp/$name.log | cut -c1-100 | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for i in 1 2; do
  B esm_fp8_new_$i biofm $E --fp8 fp8_config.fp8_recipe=DelayedScaling
  B esm_fp8_prev_$i biofm_prev $E --fp8 fp8_config.fp8_recipe=DelayedScaling
  B esm_fp8_old_$i biofm_old $E --fp8 fp8_config.fp8_recipe=DelayedScaling
done
zcat $D/lambda_phage.fa.gz $D/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
L="--model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 8192 --max-seq-length 8192 --steps 10 --warmup 3 --fp8 fp8_config.fp8_recipe=DelayedScaling"
B llama_fp8_new biofm $L
B llama_fp8_prev biofm_prev $L
B esm_bf16_new biofm $E
B esm_bf16_old biofm_old $E
wait
if [ -x /tmp/gemm_algos_bench ]; then timeout 60 /tmp/gemm_algos_bench 16 20 > /tmp/gemm_algos.txt 2>&1; echo "gemm bench rc $?" >> $S;
  grep -E "esm2-650M .* fwd|sum of" /tmp/gemm_algos.txt >> $S; else echo "gemm bench did not build: $(tail -3 /tmp/gemm_build.log)" >> $S; fi
tail -c 20000 /tmp/cuda_tests.log > /tmp/cuda_tests_tail.log
tar czf $OUT/runC_logs.tgz -C /tmp cuda_tests_tail.log $(cd /tmp && ls esm_*.json llama_*.json esm_*.log llama_*.log gemm_algos.txt 2>/dev/null)
cat $S
