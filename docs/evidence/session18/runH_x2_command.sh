#!/usr/bin/env bash
# Session 18 device command H (nvidia-h200-x2): Llama 1B shape (one 8192-token window per GPU)
# 1 -> 2 GPUs, biofm ddp (fp32 and bf16 gradient reduction) and the PyTorch DDP peer (HF
# LlamaForCausalLM, eager, bf16 autocast, fused AdamW, torchrun) in one command, NVLink.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=8 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
C="num_train_steps=80 logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false"
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
R l_one 80 build/biofm $TL
R l_ddp 80 build/biofm launch --nproc-per-node 2 $TL distributed.strategy=ddp
R l_ddp_bf16 80 build/biofm launch --nproc-per-node 2 $TL distributed.strategy=ddp distributed.bf16_reduce=true
P="bench/hf_peer_bench.py --model llama --shape 1B --data /tmp/dna_long.fasta --seq-length 8192 --micro-batch 1 --steps 10 --warmup 4"
CUDA_VISIBLE_DEVICES=0 timeout 160 python3 $P --json /tmp/t1.json > /tmp/t1.log 2>&1
echo "torch 1 GPU rc $? $(python3 -c "import json; r=json.load(open('/tmp/t1.json')); print('real_tokens_per_sec', round(r['real_tokens_per_sec']))" 2>&1)" >> $S
timeout 180 python3 -m torch.distributed.run --standalone --nproc-per-node 2 $P --json /tmp/t2.json > /tmp/t2.log 2>&1
echo "torch 2 GPUs rc $? $(python3 -c "import json; r=json.load(open('/tmp/t2.json')); print('tokens_per_sec_per_gpu', round(r['tokens_per_sec_per_gpu']), 'ranks', r.get('rank_real_tokens_per_sec'))" 2>&1)" >> $S
R l_one_2 80 build/biofm $TL
tail -3 /tmp/t2.log >> $S
tar czf $OUT/logs.tgz /tmp/*.log /tmp/t*.json /tmp/l_*/metrics.jsonl 2>/dev/null
cat $S
