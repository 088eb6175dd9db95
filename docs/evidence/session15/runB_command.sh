#!/usr/bin/env bash
# Session 15 device command B (H100): warm the whole-model torch.compile(dynamic=True) HF ESM-2
# 650M peer (length-grouped, bf16 autocast, fused AdamW) with its Inductor cache in /tmp/ind,
# then ship the cache back (split into <=15 MiB parts) so command C can time the peer and biofm
# in one command without ~540 s of compilation.
set -u
mkdir -p $OUT /tmp/ind
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind PYTHONUNBUFFERED=1 OMP_NUM_THREADS=16
S=$OUT/summary.txt; { date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 530 python3 bench/hf_peer_bench.py --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz \
  --tokens-per-batch 16384 --max-seq-length 1024 --group-by-length --steps 30 --warmup 10 --compile --compile-dynamic \
  --json $OUT/hf_compile_warm.json > $OUT/hf_warm.log 2>&1
echo "hf rc $?" >> $S
du -sh /tmp/ind >> $S
tar -C /tmp -cf - ind | xz -T16 -3 > /tmp/ind.tar.xz; ls -la /tmp/ind.tar.xz >> $S
split -b 15M -d /tmp/ind.tar.xz $OUT/ind.tar.xz.part
ls -la $OUT >> $S; tail -5 $OUT/hf_warm.log >> $S; cat $S
