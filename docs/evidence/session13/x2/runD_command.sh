#!/usr/bin/env bash
# Session 13 device command D (nvidia-h200-x2): session 11's fsdp+offload export fix verified;
# ESM-2 650M ddp scaling 1 -> 2 GPUs with NCCL's CTA policies (default / efficiency).
set -u
mkdir -p $OUT
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
OUT=$OUT timeout 240 bash bench/fsdp_offload_export_check.sh >> $S 2>&1
echo "fsdp_offload_export_check rc $?" >> $S
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=8
T="train --config-name esm2_t33_650M num_train_steps=60 logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.path=.carry/data/uniprot_20k.fasta.gz"
R() { local tag=$1; shift; rm -rf /tmp/$tag; timeout 150 env "$@" output_dir=/tmp/$tag checkpoint.ckpt_dir=/tmp/ck_$tag > $OUT/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag/metrics.jsonl | grep -o '"\(global_\)\?tokens_per_sec":[0-9.]*' | tr '\n' ' ')" >> $S; }
R one build/biofm $T
R ddp build/biofm launch --nproc-per-node 2 $T distributed.strategy=ddp
R ddp_eff NCCL_CTA_POLICY=1 build/biofm launch --nproc-per-node 2 $T distributed.strategy=ddp
R ddp_eff_bf16 NCCL_CTA_POLICY=1 build/biofm launch --nproc-per-node 2 $T distributed.strategy=ddp distributed.bf16_reduce=true
R ddp2 build/biofm launch --nproc-per-node 2 $T distributed.strategy=ddp
grep -h "CTAPolicy\|NCCL_CTA" $OUT/ddp_eff.log | head -3 >> $S
cat $S
