#!/usr/bin/env bash
# Session 19 device command B (H100), binaries of d22dd7e: the CUDA suite (NVTX ranges per
# layer, NVFP4's Hadamard transform at any token count, flat model shards); biofm under torchrun
# (two CPU processes over Gloo: the rendezvous takes MASTER_PORT + 1 beside torchrun's agent
# store); ESM-2 650M bf16 bench with the per-layer NVTX ranges (against run A's 103.8k); an nsys
# capture of two steps to list the NVTX ranges, if nsys is installed.
set -u
mkdir -p build/tests $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 300 build/tests/biofm_cuda_tests --gtest_filter="-*TrainingCurve*" > /tmp/cuda_tests.log 2>&1
echo "cuda tests rc $?" >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|backend ops:|SKIPPED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
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
if command -v nsys > /dev/null; then
  timeout 150 nsys profile -o /tmp/prof --capture-range=cudaProfilerApi --force-overwrite true \
    build/biofm train --config-name esm2_sanity device=cuda num_train_steps=6 profiler.start_step=4 profiler.end_step=5 \
    output_dir=/tmp/nsysrun checkpoint.save_every_n_steps=0 > /tmp/nsys.log 2>&1
  echo "nsys rc $?" >> $S
  nsys stats --report nvtx_sum --format csv /tmp/prof.nsys-rep 2>/dev/null | cut -d, -f1-3,9 | head -30 >> $S
else
  echo "nsys: not installed on this machine" >> $S
fi
tar czf $OUT/logs.tgz /tmp/cuda_tests.log /tmp/*.log 2>/dev/null
cat $S
