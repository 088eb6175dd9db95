#!/usr/bin/env bash
# Session 13 run E (nvidia-h200-x2): OG2 7B shape fully sharded on two H200 with the dense cuDNN
# attention graphs (session 12), no recompute: FP8 current scaling and bf16, as session 11's run I.
mkdir -p /tmp/b /tmp/w $OUT && xz -dc .carry/pack/biofm.xz > /tmp/b/biofm && chmod +x /tmp/b/biofm
export NCCL_NVLS_ENABLE=0
C7="num_train_steps=20 logger.frequency=10 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.path=.carry/data/shigella_plasmids.fasta.gz distributed.strategy=fsdp recompute=false"
run() { local name=$1 cfg=$2; shift 2; timeout 250 /tmp/b/biofm launch --nproc-per-node 2 train --config-name $cfg $C7 output_dir=/tmp/w/$name "$@" > $OUT/og2_$name.txt 2>&1; echo "== $name exit $?"; grep -h "step  *20\|error\|memory\|precision by layer\|emulated" $OUT/og2_$name.txt | cut -c1-260; }
run fp8_current_norc og2_7b_fp8_current
run bf16_norc og2_7b
