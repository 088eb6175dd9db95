# PREPARED, NOT RUN: nvidia-h200-x2 was not lent in session 20. Run as: bash THIS (OUT set by the device tool),
# carrying .carry/pack (biofm.xz of the final build, lib/ with libgloo) and .carry/data.
#!/usr/bin/env bash
# Session 20 device command X (nvidia-h200-x2, two H200), only if lent: zero2 with sharded
# gradients (new this session) on NCCL. bench/dist_gpu_check.sh (every strategy, 2 GPUs x 1
# micro batch against 1 GPU x 2; zero2 checkpoint resumed on 1 GPU), then ESM-2 650M 1 -> 2 GPUs
# under ddp, zero1, zero2 (throughput of steps 41-60 and peak memory per rank).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=8
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
timeout 290 bash bench/dist_gpu_check.sh build/biofm .carry/data/uniprot_20k.fasta.gz /tmp/dgc > /tmp/dist_gpu_check.log 2>&1
echo "dist_gpu_check rc $?" >> $S
grep -E "^==|exit|largest|rel" /tmp/dist_gpu_check.log | tail -40 >> $S
C="num_train_steps=60 logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false"
# (per-range times of steps 21-24, outside the throughput window 41-60: per-layer backward on 1 vs 2
# GPUs, gradient_sync = reductions not hidden, each collective's time on NCCL's stream)
C="$C profiler.start_step=21 profiler.end_step=24 profiler.range_times=true"
TE="train --config-name esm2_t33_650M $C dataset.path=.carry/data/uniprot_20k.fasta.gz"
R() {  # tag, timeout, command...
  local tag=$1 t=$2; shift 2; rm -rf /tmp/$tag
  timeout $t env "$@" output_dir=/tmp/$tag checkpoint.ckpt_dir=/tmp/ck_$tag > /tmp/$tag.log 2>&1
  local rc=$?
  echo "$tag rc $rc $(tail -1 /tmp/$tag/metrics.jsonl 2>/dev/null | python3 -c "
import json, sys
try:
    r = json.loads(sys.stdin.read())
    print(' '.join(f'{k}={r[k]:.2f}' if isinstance(r[k], float) else f'{k}={r[k]}' for k in ('step', 'loss', 'tokens_per_sec', 'global_tokens_per_sec', 'gpu_mem_peak_gib', 'train/gpu_memory_allocated_max_gb') if k in r))
except Exception as e:
    print('no record', e)")" >> $S
  grep -iE "peak|memory" /tmp/$tag.log | tail -2 | sed 's/^/    /' >> $S
  [ $rc -ne 0 ] && tail -3 /tmp/$tag.log | sed 's/^/    /' >> $S
}
R e_one 70 build/biofm $TE
R e_ddp 70 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_zero1 70 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=zero1
R e_zero2 70 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=zero2
for t in e_one e_ddp e_zero2; do echo "== $t"; sed -n '/range times/,/optimizer/p' /tmp/$t.log; done >> $S
tar czf $OUT/logs.tgz /tmp/*.log /tmp/e_*/metrics.jsonl /tmp/e_*/range_times_rank*.json /tmp/dgc/*.log 2>/dev/null
cat $S
