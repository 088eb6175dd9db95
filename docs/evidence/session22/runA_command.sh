#!/usr/bin/env bash
# Session 22 device command A (H100): does a newer cuDNN (9.27, the PyPI JIT package: runtime-compiled
# engines only) run our attention graphs faster than the system's 9.14? attention_bench with each,
# then ESM-2 650M bf16, Llama 1B bf16 (recipe batch) and embed of 4,000 proteins, alternating.
set -u
mkdir -p build $OUT /tmp/c927 /tmp/e
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
xz -dc .carry/pack/attention_bench.xz > build/attention_bench && chmod +x build/attention_bench
cat /tmp/part_aa .carry/cudnnB/part_ab | xz -dc | tar xf - -C /tmp/c927
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader; ls -la /tmp/c927; } > $S 2>&1
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
BASE=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}
export LD_LIBRARY_PATH=$BASE
( python3 -c "
import sys; sys.path.insert(0, 'bench')
from hf_peer_bench import build_esm
m, dims = build_esm('650M'); m.save_pretrained('/tmp/e/esm2_650M'); print(dims)" > /tmp/e/make_model.log 2>&1 ) &
zcat .carry/data/uniprot_8k.fasta.gz | awk '/^>/{n++} n<=4000' > /tmp/e/in4000.fasta
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
with() { if [ "$1" = 927 ]; then LD_LIBRARY_PATH=/tmp/c927:$BASE; else LD_LIBRARY_PATH=$BASE; fi; export LD_LIBRARY_PATH; }
for v in sys 927 sys 927; do
  with $v
  timeout 120 build/attention_bench 20 cudnn > /tmp/attn_$v.log 2>&1; echo "attention_bench $v rc $?" >> $S
done
cat /tmp/attn_sys.log > $OUT/attn_sys.log; cat /tmp/attn_927.log > $OUT/attn_927.log
LD_DEBUG=libs build/attention_bench 1 cudnn 2>&1 | grep -E "calling init: .*cudnn" | head -5 >> $S
E="--model esm2 --shape 650M --data .carry/data/uniprot_8k.fasta.gz --tokens-per-batch 16384 --steps 16 --warmup 6"
L="--model llama --shape 1B --data /tmp/dna_long.fasta --max-seq-length 8192 --tokens-per-batch 16384 --grad-acc 4 --steps 6 --warmup 2"
B() { local name=$1 v=$2; shift 2; with $v
  timeout 150 build/biofm bench "$@" --json $OUT/$name.json > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'tok/s' /tmp/$name.log | tail -1)" >> $S
  grep -E "cuDNN|GPU during" /tmp/$name.log | head -2 | sed 's/^/    /' >> $S; }
B esm_sys_1 sys $E; B esm_927_1 927 $E; B esm_sys_2 sys $E; B esm_927_2 927 $E
B llama_sys_1 sys $L; B llama_927_1 927 $L; B llama_927_2 927 $L; B llama_sys_2 sys $L
wait
for v in sys 927 sys 927; do with $v
  /usr/bin/time -f "%e s" timeout 150 build/biofm embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 \
    --input /tmp/e/in4000.fasta --output /tmp/e/o_$v.safetensors > /tmp/embed_$v.log 2>&1
  echo "embed $v rc $? $(grep -E 'records/s|seq/s' /tmp/embed_$v.log | tail -1) $(tail -1 /tmp/embed_$v.log)" >> $S
done
tar czf $OUT/logs.tgz /tmp/*.log /tmp/e/*.log 2>/dev/null
cat $S
