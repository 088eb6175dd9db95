#!/usr/bin/env bash
# Session 17 device command E (H100): compile only. The HF peer (torch.compile(dynamic=True),
# group_by_length) over the same 40 batches as the timed comparison, to fill an Inductor cache
# that is shipped back and carried into command F (a cold compile does not fit one command).
set -u
mkdir -p $OUT /tmp/ind
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind PYTHONUNBUFFERED=1 OMP_NUM_THREADS=16
S=$OUT/summary.txt; { date -u; nvidia-smi --query-gpu=name --format=csv,noheader; } > $S
timeout 470 python3 bench/hf_peer_bench.py --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz \
  --tokens-per-batch 16384 --max-seq-length 1024 --group-by-length --steps 30 --warmup 10 --compile \
  --compile-dynamic > $OUT/compile.log 2>&1
echo "compile run rc $?" >> $S
grep -E "warmup|step" $OUT/compile.log | tail -45 >> $S
du -sh /tmp/ind >> $S
tar -C /tmp -cf - ind | xz -T16 -1 > /tmp/ind.tar.xz; split -b 15M -d /tmp/ind.tar.xz $OUT/ind.tar.xz.part
ls -la $OUT >> $S; cat $S
