#!/usr/bin/env bash
# Session 19 device command E (H100), the final binaries (b5741b0): the run C checks again
# (suite with the recipe curves on ESM-2 and Llama, torchrun, bench).
# The CUDA suite; biofm under torchrun (two CPU processes over Gloo: the rendezvous takes
# MASTER_PORT + 1 beside torchrun's agent store); ESM-2 650M bf16 bench with the per-layer NVTX
# ranges (run A: 103.8k).
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 400 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
grep -E "^\[(esm2|llama) " /tmp/cuda_tests.log | awk '{print $NF}' | sort -g | tail -1 | sed 's/^/largest recipe-curve window rel: /' >> $S
# torchrun, as README shows it (CPU processes: one GPU cannot hold two NCCL ranks)
timeout 120 torchrun --standalone --nproc-per-node 2 --no-python build/biofm train --config-dir configs \
  --config-name esm2_sanity device=cpu num_train_steps=20 logger.frequency=10 output_dir=/tmp/tr \
  checkpoint.save_every_n_steps=10 > /tmp/torchrun.log 2>&1
echo "torchrun rc $?" >> $S
grep -E "distributed:|^step|done:|error" /tmp/torchrun.log | head -8 >> $S
ls /tmp/tr/checkpoints >> $S 2>&1
D=.carry/data
timeout 120 build/biofm bench --model esm2 --shape 650M --data $D/uniprot_20k.fasta.gz --tokens-per-batch 16384 \
  --steps 20 --warmup 8 > /tmp/esm650_bf16.log 2>&1
echo "esm650_bf16 rc $? $(grep -E 'tok/s' /tmp/esm650_bf16.log | tail -1 | sed 's/biofm esm2_t33_650M: //')" >> $S
grep "GPU during" /tmp/esm650_bf16.log | sed 's/^/    /' >> $S
tar czf $OUT/logs.tgz /tmp/cuda_tests.log /tmp/*.log 2>/dev/null
cat $S
