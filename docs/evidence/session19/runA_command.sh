#!/usr/bin/env bash
# Session 19 device command A (H100): the binaries of a54bd6e (NVML opened once per process),
# never GPU-run before: the CUDA suite (all but the long training curves); a GPU `biofm train`
# whose metrics carry gpu/* keys; ESM-2 650M bf16 and FP8 bench with the GPU monitor line.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 330 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|fp8 release inputs|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
timeout 100 build/biofm train --config-name esm2_sanity device=cuda num_train_steps=60 logger.frequency=20 \
  output_dir=/tmp/run checkpoint.save_every_n_steps=0 > /tmp/train.log 2>&1
echo "train rc $?" >> $S
grep -E "^step|validation" /tmp/train.log | tail -4 >> $S
python3 -c "
import json
recs = [json.loads(l) for l in open('/tmp/run/metrics.jsonl')]
last = [r for r in recs if any(k.startswith('gpu') for k in r)]
print('records with gpu keys:', len(last), 'of', len(recs), {k: last[-1][k] for k in last[-1] if k.startswith('gpu')} if last else '')" >> $S 2>&1
D=.carry/data
B() {  # name, args...
  local name=$1; shift
  timeout 120 build/biofm bench "$@" --json /tmp/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1 | sed 's/biofm esm2_t33_650M: //')" >> $S
  grep "GPU during" /tmp/$name.log | sed 's/^/    /' >> $S
}
E="--model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8"
B esm650_bf16 $E
B esm650_fp8 $E --fp8
tar czf $OUT/logs.tgz /tmp/cuda_tests.log /tmp/*.log /tmp/*.json /tmp/run/metrics.jsonl 2>/dev/null
cat $S
