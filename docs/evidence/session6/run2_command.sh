# Session 6, run 2 (nvidia-h200-x2): OG2 7B shape fully sharded on two H200 (bf16, FP8; recompute on/off).
mkdir -p /tmp/b /tmp/w && [ -x /tmp/b/biofm ] || { xz -dc .carry/pack/biofm.xz > /tmp/b/biofm && chmod +x /tmp/b/biofm; }
export NCCL_NVLS_ENABLE=0
C7="train --config-name og2_7b num_train_steps=20 logger.frequency=10 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.path=.carry/pack/data/shigella_plasmids.fasta.gz distributed.strategy=fsdp"
run() { local name=$1; shift; timeout 200 /tmp/b/biofm launch --nproc-per-node 2 $C7 output_dir=/tmp/w/$name "$@" > $OUT/og2_$name.txt 2>&1; echo "== $name exit $?"; grep -h "step  *20\|error\|memory" $OUT/og2_$name.txt | cut -c1-240; }
run bf16_rc
run bf16_norc recompute=false
run fp8_norc recompute=false fp8_config.enabled=true
