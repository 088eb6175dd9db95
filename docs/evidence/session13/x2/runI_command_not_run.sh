#!/usr/bin/env bash
# NOT RUN in session 13: nvidia-h200-x2 was withdrawn before it could start. Run it first next time.
# Session 13 run I (nvidia-h200-x2): ddp with the gradients in NCCL symmetric memory
# (distributed.nccl_symmetric=true) against the plain buffers, ESM-2 650M and Llama 1B, 1 -> 2 GPUs.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=8
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
C="num_train_steps=60 logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false"
TE="train --config-name esm2_t33_650M $C dataset.path=.carry/data/uniprot_20k.fasta.gz"
TL="train --config-name llama3_1b $C dataset.path=/tmp/dna_long.fasta"
R() { local tag=$1; shift; rm -rf /tmp/$tag; timeout 150 env "$@" output_dir=/tmp/$tag checkpoint.ckpt_dir=/tmp/ck_$tag > $OUT/$tag.log 2>&1; echo "$tag rc $? $(tail -1 /tmp/$tag/metrics.jsonl | grep -o '"\(global_tokens_per_sec\|tokens_per_sec\|loss\)":[0-9.]*' | tr '\n' ' ')" >> $S; }
R e_one build/biofm $TE
R e_ddp build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_symm build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp distributed.nccl_symmetric=true
R e_symm_bf16 build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp distributed.nccl_symmetric=true distributed.bf16_reduce=true
R e_zero1_symm build/biofm launch --nproc-per-node 2 $TE distributed.strategy=zero1 distributed.nccl_symmetric=true
R l_one build/biofm $TL
R l_ddp build/biofm launch --nproc-per-node 2 $TL distributed.strategy=ddp
R l_symm build/biofm launch --nproc-per-node 2 $TL distributed.strategy=ddp distributed.nccl_symmetric=true
grep -h "distributed:" $OUT/e_symm.log | head -1 >> $S
grep -h "error\|warning" $OUT/*.log | head -5 >> $S
cat $S
