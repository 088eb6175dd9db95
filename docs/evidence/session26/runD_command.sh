#!/usr/bin/env bash
# Session 26 device command D (nvidia-h200-x2): data-parallel hooks no longer join the weight-
# gradient side stream into the compute stream at every layer; the NCCL stream waits for the side
# stream's work instead (core/side_stream.h order_stream_after), so under ddp/zero1 the next
# layer's backward goes on beside the side work. biofm_new = main + this change (built on the CPU
# machine), biofm = 4814b00 (runs A-C). GPU 1: the whole CUDA suite of the new build, beside
# bench/dist_gpu_check.sh with the new binary (every strategy on 2 GPUs against 1); then the
# side-stream tests alone; then ESM-2 650M ddp on 2 GPUs, old and new alternating (tokens/s of
# steps 21-40), the new one-GPU run, and ddp with the side stream off.
set -u
mkdir -p build/tests $OUT /work
ln -sfn $PWD /work/ci-clone5   # the test binary's BIOFM_SOURCE_DIR
xz -dc .carry/pack/biofm.xz > build/biofm_old && chmod +x build/biofm_old
xz -dc .carry/pack/biofm_new.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/biofm_cuda_tests.xz > build/tests/biofm_cuda_tests && chmod +x build/tests/biofm_cuda_tests
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=8
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
( CUDA_VISIBLE_DEVICES=1 timeout 260 build/tests/biofm_cuda_tests --gtest_filter='-*TrainingCurve*' \
    > /tmp/cuda_tests.log 2>&1; echo "cuda tests (GPU 1, new build) rc $?" > /tmp/tests_rc ) &
timeout 300 bash bench/dist_gpu_check.sh build/biofm .carry/data/uniprot_20k.fasta.gz /tmp/dgc > /tmp/dist_gpu_check.log 2>&1
echo "dist_gpu_check (new binary) rc $?" >> $S
grep -E "exit [^0]|run |e-|missing" /tmp/dist_gpu_check.log | tail -30 >> $S
wait
cat /tmp/tests_rc >> $S
grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" /tmp/cuda_tests.log >> $S
grep -B3 -A12 "Failure" /tmp/cuda_tests.log | head -40 >> $S
CUDA_VISIBLE_DEVICES=1 timeout 60 build/tests/biofm_cuda_tests --gtest_filter='CudaSideStream.*' > /tmp/side.log 2>&1
echo "side-stream tests alone rc $?" >> $S
grep -E "^\[  PASSED|^\[  FAILED|recompute|actual" /tmp/side.log >> $S
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
    print(' '.join(f'{k}={r[k]:.3f}' if isinstance(r[k], float) else f'{k}={r[k]}' for k in ('loss', 'step_time', 'tokens_per_sec', 'global_tokens_per_sec', 'gpu_mem_peak_gib') if k in r))
except Exception as e:
    print('no record', e)")" >> $S
  [ $rc -ne 0 ] && tail -3 /tmp/$tag.log | sed 's/^/    /' >> $S
}
R e_one_new build/biofm $TE
R e_ddp_old_1 build/biofm_old launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_ddp_new_1 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_ddp_old_2 build/biofm_old launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_ddp_new_2 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_zero1_new build/biofm launch --nproc-per-node 2 $TE distributed.strategy=zero1
R e_ddp_new_one_stream build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp ops.wgrad_stream=false
tar czf $OUT/logs.tgz /tmp/*.log /tmp/e_*/metrics.jsonl /tmp/dgc/*.log 2>/dev/null
cat $S
