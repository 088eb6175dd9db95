#!/usr/bin/env bash
# Session 16 device command A (H100): the CUDA suite on the current code (session 15's last CUDA
# changes were compiled but not GPU-run; new: GEMM tuning table tests); a tuned GPU training run
# checkpointed and resumed (the resume line must name the tuned GEMM algorithms taken); ESM-2 650M
# bf16 and FP8 with ops.gemm_autotune on / off, alternating.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > $OUT/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $OUT/cuda_tests.log >> $S
grep -B3 -A12 "Failure" $OUT/cuda_tests.log | head -60 >> $S
gzip $OUT/cuda_tests.log
# Tuned training on the GPU, checkpoint at step 3, resumed from it.
T="train --config-name esm2_sanity device=cuda ops.gemm_autotune=true num_train_steps=6 checkpoint.save_every_n_steps=3 logger.frequency=1 dataset.val_every_n_steps=0"
rm -rf /tmp/rt && build/biofm $T output_dir=/tmp/rt > $OUT/resume_a.log 2>&1; echo "train a rc $?" >> $S
ls /tmp/rt/checkpoints/step_3 >> $S
cp /tmp/rt/metrics.jsonl /tmp/rt_a.jsonl; rm -rf /tmp/rt/checkpoints/step_6
build/biofm $T output_dir=/tmp/rt > $OUT/resume_b.log 2>&1; echo "train b rc $?" >> $S
grep "resumed from" $OUT/resume_b.log >> $S
python3 - >> $S <<'PY'
import json
a=[json.loads(l) for l in open('/tmp/rt_a.jsonl') if l.strip()]
b=[json.loads(l) for l in open('/tmp/rt/metrics.jsonl') if l.strip()]
for x,y in zip(a,b):
    if 'loss' in x: print('step', x['step'], repr(x['loss']), repr(y['loss']), 'same' if x['loss']==y['loss'] else 'differ')
PY
B() { local tag=$1; shift; build/biofm bench "$@" --json /tmp/$tag.json > /tmp/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag.log)" >> $S; cat /tmp/$tag.log >> $OUT/bench_logs.txt; }
E="--model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
for r in 1 2; do
  B esm650_bf16_tune_$r $E ops.gemm_autotune=true; B esm650_bf16_notune_$r $E ops.gemm_autotune=false
  B esm650_fp8_tune_$r $E --fp8 ops.gemm_autotune=true; B esm650_fp8_notune_$r $E --fp8 ops.gemm_autotune=false
done
gzip $OUT/bench_logs.txt
cat $S
