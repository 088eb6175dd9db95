#!/usr/bin/env bash
# Session 26 device command B (nvidia-h200-x2): main (4814b00) on two H200.
# GPU 1, in the background: the whole CUDA suite (run A's failed to find the source tree it was
# built in: a link gives it). Meanwhile bench/dist_gpu_check.sh (every strategy, 2 GPUs x 1 micro
# batch against 1 GPU x 2, NCCL; session 20's zero2 with sharded gradients has not run on GPUs
# before). Then ESM-2 650M bf16 1 -> 2 GPUs under ddp (weight-gradient side stream on and off),
# zero1, zero2 (tokens/s of steps 21-40).
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=8
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
( CUDA_VISIBLE_DEVICES=1 timeout 260 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' \
    > /tmp/cuda_tests.log 2>&1; echo "cuda tests (GPU 1) rc $?" > /tmp/tests_rc ) &
timeout 300 bash bench/dist_gpu_check.sh build/biofm .carry/data/uniprot_20k.fasta.gz /tmp/dgc > /tmp/dist_gpu_check.log 2>&1
echo "dist_gpu_check rc $?" >> $S
grep -E "^==|exit|run |e-|missing" /tmp/dist_gpu_check.log | tail -60 >> $S
wait
cat /tmp/tests_rc >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -60 >> $S
tail -c 30000 /tmp/cuda_tests.log > $OUT/cuda_tests_tail.log
C="num_train_steps=40 logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.val_every_n_steps=0"
TE="train --config-name esm2_t33_650M $C dataset.path=.carry/data/uniprot_20k.fasta.gz"
R() {  # tag, command...
  local tag=$1; shift; rm -rf /tmp/$tag
  timeout 75 "$@" output_dir=/tmp/$tag checkpoint.ckpt_dir=/tmp/ck_$tag > /tmp/$tag.log 2>&1
  local rc=$?
  echo "$tag rc $rc $(tail -1 /tmp/$tag/metrics.jsonl 2>/dev/null | python3 -c "
import json, sys
try:
    r = json.loads(sys.stdin.read())
    print(' '.join(f'{k}={r[k]:.3f}' if isinstance(r[k], float) else f'{k}={r[k]}' for k in r if any(s in k for s in ('step', 'loss', 'token', 'mem', 'mfu'))))
except Exception as e:
    print('no record', e)")" >> $S
  [ $rc -ne 0 ] && tail -3 /tmp/$tag.log | sed 's/^/    /' >> $S
}
R e_one build/biofm $TE
R e_ddp build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_ddp_one_stream build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp ops.wgrad_stream=false
R e_zero1 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=zero1
R e_zero2 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=zero2
tar czf $OUT/logs.tgz /tmp/*.log /tmp/e_*/metrics.jsonl /tmp/dgc/*.log 2>/dev/null
cat $S
