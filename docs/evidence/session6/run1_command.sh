# Session 6, run 1 (nvidia-h200-x2): fsdp equivalence on GPUs, then ESM-2 650M ddp/zero2/fsdp on 2 GPUs.
mkdir -p /tmp/b /tmp/w && xz -dc .carry/pack/biofm.xz > /tmp/b/biofm && chmod +x /tmp/b/biofm
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/gpus.txt
timeout 280 bash bench/dist_gpu_check.sh /tmp/b/biofm .carry/pack/data/uniprot_20k.fasta.gz /tmp/w/check > $OUT/check.txt 2>&1
tail -12 $OUT/check.txt
tail -5 /tmp/w/check/two_fsdp.log
timeout 300 bash bench/dist_variants.sh /tmp/b/biofm esm2_t33_650M .carry/pack/data/uniprot_20k.fasta.gz /tmp/w/v650 "" "ddp||" "zero2|distributed.strategy=zero2|" "fsdp|distributed.strategy=fsdp|" > $OUT/v650.txt 2>&1
cat $OUT/v650.txt
grep -h "step  *40\|error" /tmp/w/v650/*.log | cut -c1-220
tar czf $OUT/logs1.tgz -C /tmp/w check/one.log check/two_fsdp.log v650/one.log v650/fsdp.log v650/ddp.log 2>/dev/null
