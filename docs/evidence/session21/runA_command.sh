#!/usr/bin/env bash
# Session 21 device command A (H100): FP8 MLP GELU in the CUTLASS FP8 GEMM epilogues. The CUDA
# suite (backend ops incl. the new linear_*_fp8 +gelu/+dgelu rows, FP8 training curves), then
# ESM-2 650M FP8 (current scaling) with ops.gemm_fused_gelu on / off, alternating.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 330 build/tests/biofm_cuda_tests > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A14 "Failure" /tmp/cuda_tests.log | head -60 >> $S
D=.carry/data
for v in on off; do
  o=true; [ $v = off ] && o=false
  timeout 90 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
    --steps 20 --warmup 6 --fp8 ops.gemm_fused_gelu=$o --json $OUT/esm650_fp8_$v.json > /tmp/esm650_fp8_$v.log 2>&1
  echo "esm650 fp8 fused_gelu=$v rc $? $(grep -E 'tok/s' /tmp/esm650_fp8_$v.log | tail -1)" >> $S
  grep -E "GPU during|fused" /tmp/esm650_fp8_$v.log | sed 's/^/    /' >> $S
done
tar czf $OUT/logs.tgz /tmp/*.log 2>/dev/null
cat $S
