#!/usr/bin/env bash
# Session 27 device command B (one H200): where `embed` stands and where its time goes now.
# embed vs HF bf16 on 4,000 UniProt proteins (bench/embed_vs_hf.sh, as in session 26), then
# biofm embed of all 20,000 proteins (start-up amortised) with the defaults, with 32k-token
# batches and with cuDNN engine autotuning, and an nsys kernel summary of the 4,000-protein embed.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} PYTHONUNBUFFERED=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit,clocks.max.sm,temperature.gpu --format=csv,noheader; } > $S 2>&1
D=.carry/data
timeout 200 bash bench/embed_vs_hf.sh build/biofm --data $D/uniprot_20k.fasta.gz --records 4000 --out /tmp/evh \
  > /tmp/embed_vs_hf.txt 2>&1
echo "embed_vs_hf rc $?" >> $S
tail -6 /tmp/embed_vs_hf.txt >> $S
M=/tmp/evh/esm2_650M
zcat $D/uniprot_20k.fasta.gz > /tmp/all.fasta
E() {  # name, extra args
  local name=$1; shift
  timeout 60 build/biofm embed --model $M --input /tmp/all.fasta --output /tmp/$name.safetensors --device cuda \
    --precision bf16 --progress "$@" > /tmp/$name.log 2>&1
  echo "$name rc $? $(grep -E 'records in' /tmp/$name.log | sed 's/.*| //')" >> $S
  grep -E "^embed: " /tmp/$name.log | head -2 | sed 's/^/    first: /' >> $S
}
E embed20k_a
E embed20k_tokens32k --max-tokens 32768
E embed20k_autotune --ops sdpa_autotune=true
E embed20k_b
if command -v nsys > /dev/null; then
  timeout 90 nsys profile -o /tmp/embed4k --force-overwrite true build/biofm embed --model $M --input /tmp/evh/input.fasta \
    --output /tmp/nsys.safetensors --device cuda --precision bf16 > /tmp/nsys.log 2>&1
  echo "nsys rc $?" >> $S
  nsys stats --report cuda_gpu_kern_sum --format csv --output /tmp/embed4k /tmp/embed4k.nsys-rep > /dev/null 2>&1
  nsys stats --report cuda_gpu_trace --format csv --output /tmp/embed4k /tmp/embed4k.nsys-rep > /dev/null 2>&1
  ls /tmp/embed4k* >> $S
  head -25 /tmp/embed4k_cuda_gpu_kern_sum.csv | cut -c1-200 >> $S
  gzip -c /tmp/embed4k_cuda_gpu_trace.csv > /tmp/embed4k_gpu_trace.csv.gz 2>/dev/null
else
  echo "no nsys" >> $S
fi
tar czf $OUT/runB_logs.tgz -C /tmp embed_vs_hf.txt $(cd /tmp && ls embed20k_*.log nsys.log embed4k_cuda_gpu_kern_sum.csv embed4k_gpu_trace.csv.gz 2>/dev/null)
cat $S
