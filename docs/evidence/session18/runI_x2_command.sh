#!/usr/bin/env bash
# Session 18 device command I (nvidia-h200-x2): 1 -> 2 GPUs at four micro batches per optimizer
# step (grad_acc_steps=4; Llama 1B at the recipe batch, 2 windows of 8192 per micro batch):
# the all-reduce then runs once per four micro batches, beside the last one's backward.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=8 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
C="num_train_steps=40 logger.frequency=10 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false grad_acc_steps=4"
TE="train --config-name esm2_t33_650M $C dataset.path=.carry/data/uniprot_20k.fasta.gz"
TL="train --config-name llama3_1b $C dataset.path=/tmp/dna_long.fasta dataset.max_tokens_per_batch=16384"
R() {  # tag, timeout, command...
  local tag=$1 t=$2; shift 2; rm -rf /tmp/$tag
  timeout $t env "$@" output_dir=/tmp/$tag checkpoint.ckpt_dir=/tmp/ck_$tag > /tmp/$tag.log 2>&1
  local rc=$?
  echo "$tag rc $rc $(tail -1 /tmp/$tag/metrics.jsonl 2>/dev/null | python3 -c "
import json, sys
try:
    r = json.loads(sys.stdin.read())
    print(' '.join(f'{k}={r[k]:.1f}' if isinstance(r[k], float) else f'{k}={r[k]}' for k in ('step', 'loss', 'tokens_per_sec', 'global_tokens_per_sec', 'gpu_sm_clock_mhz', 'gpu_power_w') if k in r))
except Exception as e:
    print('no record', e)")" >> $S
  [ $rc -ne 0 ] && tail -3 /tmp/$tag.log | sed 's/^/    /' >> $S
}
R l_one 100 build/biofm $TL
R l_ddp 100 build/biofm launch --nproc-per-node 2 $TL distributed.strategy=ddp
R e_one 90 build/biofm $TE
R e_ddp 90 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
tar czf $OUT/logs.tgz /tmp/*.log /tmp/l_*/metrics.jsonl /tmp/e_*/metrics.jsonl 2>/dev/null
cat $S
