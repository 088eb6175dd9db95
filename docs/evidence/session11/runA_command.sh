#!/usr/bin/env bash
# Session 11 device command A: which cuDNN does torch bring; ESM-2 650M and Llama 1B benches with
# the system cuDNN 9.14 and with torch's (if newer).
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
S=$OUT/probe.txt
zcat .carry/data/lambda_phage.fa.gz .carry/data/shigella_plasmids.fasta.gz > /tmp/dna_long.fasta
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader
  python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())"
  find / -xdev -name 'libcudnn_graph.so*' 2>/dev/null; find / -xdev -name 'libcudnn_engines_tensor_ir*' 2>/dev/null
} > $S 2>&1
TD=$(dirname $(find / -xdev -path '*site-packages/nvidia/cudnn/lib/libcudnn_graph.so.9' 2>/dev/null | head -1))
echo "torch cudnn dir: $TD" >> $S
B() { local tag=$1; shift; build/biofm bench "$@" --json $OUT/$tag.json > $OUT/$tag.log 2>&1; echo "$tag rc $? $(tail -1 $OUT/$tag.log)" >> $S; }
run_set() { local sfx=$1
  build/biofm info 2>&1 | grep -i cudnn >> $S
  B esm650_$sfx --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8
  B llama1b_$sfx --model llama --shape 1B --data /tmp/dna_long.fasta --tokens-per-batch 8192 --max-seq-length 8192 --steps 20 --warmup 5
}
run_set sys
if [ -n "$TD" ] && [ -f "$TD/libcudnn_graph.so.9" ]; then
  export LD_LIBRARY_PATH=$TD
  run_set torch
  build/biofm bench --model esm2 --shape 650M --data .carry/data/uniprot_20k.fasta.gz --tokens-per-batch 16384 --steps 20 --warmup 8 --fp8 --json $OUT/esm650_fp8_torch.json > $OUT/esm650_fp8_torch.log 2>&1; echo "fp8 torch rc $? $(tail -1 $OUT/esm650_fp8_torch.log)" >> $S
fi
cat $S
