#!/usr/bin/env bash
# Session 18 device command G (nvidia-h200-x2, two H200): data parallel 1 -> 2 GPUs, ESM-2 650M
# and Llama 1B (one 8192-token window per GPU), plain ddp against ddp with the gradient buckets
# in NCCL symmetric memory (distributed.nccl_symmetric, never run on two GPUs before), then bf16
# reduction and the socket transport ("two nodes"). 60 steps each; throughput of steps 41-60.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=8
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
C="num_train_steps=60 logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false"
TE="train --config-name esm2_t33_650M $C dataset.path=.carry/data/uniprot_20k.fasta.gz"
TL="train --config-name llama3_1b $C dataset.path=/tmp/dna_long.fasta"
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
R e_one 80 build/biofm $TE
R e_ddp 80 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_symm 80 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp distributed.nccl_symmetric=true
R l_one 70 build/biofm $TL
R l_ddp 70 build/biofm launch --nproc-per-node 2 $TL distributed.strategy=ddp
R l_symm 70 build/biofm launch --nproc-per-node 2 $TL distributed.strategy=ddp distributed.nccl_symmetric=true
R e_ddp_2 80 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_one_2 80 build/biofm $TE
R e_sock 90 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_sock_bf16 90 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp distributed.bf16_reduce=true
grep -h "distributed:\|symmetric" /tmp/e_symm.log | head -3 >> $S
tar czf $OUT/logs.tgz /tmp/*.log /tmp/e_*/metrics.jsonl /tmp/l_*/metrics.jsonl 2>/dev/null
cat $S
