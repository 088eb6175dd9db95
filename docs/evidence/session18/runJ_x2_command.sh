#!/usr/bin/env bash
# Session 18 device command J (nvidia-h200-x2): the OpenGenome2 7B shape fully sharded on two
# H200 with FP8 (current scaling, no recompute), as session 6 run 2 measured it, now with the
# FP8 layers keeping only their inputs' codes (ops.fp8_release_inputs) against keeping them.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,power.limit,temperature.gpu --format=csv,noheader; } > $S 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 OMP_NUM_THREADS=8
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
C7="train --config-name og2_7b num_train_steps=20 logger.frequency=10 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.path=.carry/data/shigella_plasmids.fasta.gz distributed.strategy=fsdp recompute=false fp8_config.enabled=true"
run() { local name=$1; shift; timeout 110 build/biofm launch --nproc-per-node 2 $C7 output_dir=/tmp/w/$name "$@" > /tmp/og2_$name.txt 2>&1; echo "== $name exit $?" >> $S; grep -h "step  *20\|step  *10\|rror" /tmp/og2_$name.txt | cut -c1-260 >> $S; }
run fp8_release
run fp8_keep ops.fp8_release_inputs=false
tar czf $OUT/logs.tgz /tmp/og2_*.txt 2>/dev/null
cat $S
