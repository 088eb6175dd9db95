#!/usr/bin/env bash
# Session 11 device command G (nvidia-h200-x2): the two-GPU equivalence check with this session's
# fsdp bf16 reduction and optimizer-state offload, then ESM-2 650M zero1 / fsdp with and without
# offload on two GPUs (throughput cost of the host update).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=16
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; } > $S
timeout 330 bash bench/dist_gpu_check.sh build/biofm .carry/data/uniprot_20k.fasta.gz /tmp/dgc > $OUT/dist_gpu_check.txt 2>&1
echo "dist_gpu_check exit $?" >> $S
tail -14 $OUT/dist_gpu_check.txt >> $S
P="train --config-name esm2_t33_650M dataset.path=.carry/data/uniprot_20k.fasta.gz device=cuda num_train_steps=30 logger.frequency=10 checkpoint.save_every_n_steps=1000 checkpoint.save_final_model=false"
for v in "zero1 false" "zero1 true" "fsdp false" "fsdp true"; do set -- $v
  timeout 150 build/biofm launch --nproc-per-node 2 $P output_dir=/tmp/p_$1_$2 distributed.strategy=$1 optimizer.offload=$2 > $OUT/p_$1_$2.log 2>&1
  echo "650M $1 offload=$2 rc $? $(grep -o '"global_tokens_per_sec":[0-9.]*' /tmp/p_$1_$2/metrics.jsonl | tail -1) $(grep -o '"gpu_mem_peak_gib":[0-9.]*' /tmp/p_$1_$2/metrics.jsonl | tail -1) $(grep -m1 'offloaded' $OUT/p_$1_$2.log | cut -c1-120)" >> $S
done
cat $S
