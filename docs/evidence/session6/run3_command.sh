# Session 6, run 3a (nvidia-h200-x2): fsdp equivalence with construction-time sharding; ESM-2 15B fully sharded on two H200.
mkdir -p /tmp/b /tmp/w && xz -dc .carry/pack/biofm.xz > /tmp/b/biofm && chmod +x /tmp/b/biofm
export NCCL_NVLS_ENABLE=0
timeout 150 bash bench/dist_gpu_check.sh /tmp/b/biofm .carry/pack/data/uniprot_20k.fasta.gz /tmp/w/check > $OUT/check3.txt 2>&1; tail -9 $OUT/check3.txt
C15="train --config-name esm2_t48_15B num_train_steps=20 logger.frequency=10 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.path=.carry/pack/data/uniprot_20k.fasta.gz dataset.max_tokens_per_batch=8192 distributed.strategy=fsdp"
run() { local name=$1; shift; /usr/bin/time -v timeout 200 /tmp/b/biofm launch --nproc-per-node 2 $C15 output_dir=/tmp/w/$name "$@" > $OUT/esm15b_$name.txt 2>&1; echo "== $name exit $?"; grep -h "biofm train\|step  *[12]0/\|error\|Maximum resident\|Elapsed" $OUT/esm15b_$name.txt | cut -c1-240; }
run mixed_rc recompute=true
run bf16_rc precision=bf16 recompute=true
