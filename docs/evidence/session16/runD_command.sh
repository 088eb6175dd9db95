#!/usr/bin/env bash
# Session 16 device command D (H100): where embed's time goes beside the forward passes. biofm
# embed against HF bf16 on 4,000 UniProt proteins (bench/embed_vs_hf.sh, final binary), then the
# same biofm embed with ops.attention_verbose (each cuDNN graph built, with its build time) and on
# 8,000 proteins (the rate of the added batches).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader; } > $S
export OMP_NUM_THREADS=16 PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-}  # Gloo and its libraries (not on the GPU machine)
timeout 300 bash bench/embed_vs_hf.sh build/biofm --data .carry/data/uniprot_20k.fasta.gz --records 4000 --out /tmp/e > $OUT/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S; tail -6 $OUT/embed_vs_hf.txt >> $S
E="embed --model /tmp/e/esm2_650M --device cuda --max-tokens 16384 --precision bf16"
build/biofm $E --input /tmp/e/input.fasta --output /tmp/v.safetensors --ops attention_verbose=true > $OUT/embed_verbose.log 2>&1
echo "verbose rc $?" >> $S
grep -c "built cuDNN SDPA graph" $OUT/embed_verbose.log >> $S
grep "built cuDNN" $OUT/embed_verbose.log | awk '{for(i=1;i<=NF;i++) if($i=="in") s+=$(i+1)} END {print "graph build ms total", s}' >> $S
grep "records in" $OUT/embed_verbose.log >> $S
python3 - <<'PY'
import gzip
out = open('/tmp/in8k.fasta', 'w'); n = 0; name = None; seq = []
for line in gzip.open('.carry/data/uniprot_20k.fasta.gz', 'rt'):
    if line.startswith('>'):
        if name is not None:
            out.write(name + ''.join(seq)[:1022] + '\n'); n += 1
            if n == 8000: break
        name, seq = line, []
    else:
        seq.append(line.strip())
PY
for r in 1 2; do
  build/biofm $E --input /tmp/e/input.fasta --output /tmp/a.safetensors > /tmp/a.log 2>&1; echo "4k_$r $(grep 'records in' /tmp/a.log | sed 's/.*|//')" >> $S
  build/biofm $E --input /tmp/in8k.fasta --output /tmp/b.safetensors > /tmp/b.log 2>&1; echo "8k_$r $(grep 'records in' /tmp/b.log | sed 's/.*|//')" >> $S
done
cat $S
