#!/usr/bin/env bash
# Session 17 device command F (H100): ESM-2 650M, biofm against the HF peer (torch.compile
# dynamic=True + group_by_length), one command, same data, with the Inductor cache that command
# E filled. hf_peer_bench.py reports the rate over all timed steps and over those that did not
# compile (commit 970c874's accounting, first GPU run).
set -u
mkdir -p build $OUT /tmp/ind
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
cat .carry/peer/ind.tar.xz.part* | xz -dc | tar -C /tmp -xf -
export TORCHINDUCTOR_CACHE_DIR=/tmp/ind PYTHONUNBUFFERED=1 OMP_NUM_THREADS=16
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
S=$OUT/summary.txt; { date -u; nvidia-smi --query-gpu=name --format=csv,noheader; du -sh /tmp/ind; } > $S
timeout 560 bash bench/run_peer_comparison.sh build/biofm --model esm2 --shape 650M \
  --data .carry/data/uniprot_20k.fasta.gz --skip-eager --steps 30 --out /tmp/peer \
  --hf-args "--compile-dynamic" > $OUT/peer.log 2>&1
echo "peer rc $?" >> $S
cp /tmp/peer/*.json $OUT/ 2>/dev/null
grep -E "warmup|timed|real tok|compil" /tmp/peer/hf_compile.log | tail -20 >> $S
tail -14 $OUT/peer.log >> $S; cat $S
