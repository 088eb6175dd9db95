#!/usr/bin/env bash
# Session 18 device command F (H100): `biofm train` on the GPU writes the window's GPU clock,
# power and temperature into its metrics (progress line, metrics.jsonl, gpu/* keys); the
# CUDA tests of checkpoints, the GPU monitor and FP8.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 150 build/tests/biofm_cuda_tests --gtest_filter="CudaCheckpoint*:CudaGpuMonitor*:CudaFp8*:CudaInfer*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|fp8 release inputs|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
timeout 200 build/biofm train --config-name esm2_sanity device=cuda num_train_steps=60 logger.frequency=20 \
  output_dir=/tmp/run checkpoint.save_every_n_steps=0 > /tmp/train.log 2>&1
echo "train rc $?" >> $S
grep -E "^step|validation" /tmp/train.log >> $S
python3 -c "
import json
recs = [json.loads(l) for l in open('/tmp/run/metrics.jsonl')]
last = [r for r in recs if 'loss' in r][-1]
print('last train record gpu keys:', {k: last[k] for k in last if k.startswith('gpu')})" >> $S 2>&1
tar czf $OUT/logs.tgz /tmp/cuda_tests.log /tmp/train.log /tmp/run/metrics.jsonl 2>/dev/null
cat $S
