#!/usr/bin/env bash
# biofm embed vs Hugging Face transformers (bf16, SDPA, no grad, length-sorted ~16k-token
# batches; optionally torch.compile) on the same proteins and the same ESM-2 weights (650M
# shape, random init): sequences/s, tokens/s, and the error of biofm's bf16 embeddings against
# its fp32 ones. Needs a GPU, torch, transformers and safetensors.
#
# Usage: bench/embed_vs_hf.sh BIN [--data FASTA[.gz]] [--records 4000] [--shape 650M]
#                             [--tokens-per-batch 16384] [--max-seq-length 1024] [--compile] [--out DIR]
# Default data: data/proteins_sample.fasta + data/proteins_val.fasta (2,200 UniProt proteins);
# any FASTA files work (comma-separated, plain or .gz), of which the first --records are used.
set -euo pipefail
if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
BIN=$(realpath "$1"); shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec "${PYTHON:-python3}" "$HERE/embed_vs_hf.py" --biofm "$BIN" "$@"
