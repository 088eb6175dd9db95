#!/usr/bin/env bash
# Session 15 device command D (H100): ESM-2 650M, biofm against the HF peer with whole-model
# torch.compile(dynamic=True) and length-grouped batches, one command, same data. The Inductor
# cache from command B (first graph compiled) is unpacked first; the cache is shipped back.
set -u
mkdir -p build $OUT /tmp/ind
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
cat .carry/peer/ind.tar.xz.part* | xz -dc | tar -C /tmp -xf -
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind PYTHONUNBUFFERED=1 OMP_NUM_THREADS=16
S=$OUT/summary.txt; { date -u; nvidia-smi --query-gpu=name --format=csv,noheader; du -sh /tmp/ind; } > $S
timeout 555 bash bench/run_peer_comparison.sh build/biofm --model esm2 --shape 650M \
  --data .carry/data/uniprot_20k.fasta.gz --skip-eager --steps 40 --out /tmp/peer \
  --hf-args "--compile-dynamic" > $OUT/peer.log 2>&1
echo "peer rc $?" >> $S
cp /tmp/peer/*.json $OUT/ 2>/dev/null
grep -E "warmup|timed|real tok" /tmp/peer/hf_compile.log >> $S
tar -C /tmp -cf - ind | xz -T16 -1 > /tmp/ind.tar.xz; split -b 15M -d /tmp/ind.tar.xz $OUT/ind.tar.xz.part
tail -12 $OUT/peer.log >> $S; cat $S
