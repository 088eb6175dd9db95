#!/usr/bin/env bash
# Data-pipeline figures of docs/DATA.md ("Measured"), on the CPU machine:
#   1. biofm prepare on protein FASTA made from the bundled proteins with mutations
#      (tools/make_protein_corpus.py), at two sizes: MB/s (wall and per core-second) and peak RSS;
#   2. the training loader (biofm bench-data): ESM-2 packed + masked batches on one thread;
#   3. start-up on a synthetic prepared dataset of RECORDS records (default 10^8): open + first
#      batch, with and without the CRC32 check, and `biofm train` to its first step.
#   bench/data_bench.sh [BIN] [WORK_DIR] [CORPUS_MB] [RECORDS]
# Runs under nice; run it when the machine is otherwise idle (uptime shows the load).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${1:-$root/build-cpu/biofm}
work=${2:-/tmp/biofm_data_bench}
mb=${3:-400}
records=${4:-100000000}
mkdir -p "$work"
run() { nice -n 10 /usr/bin/time -f "  wall %e s, user %U s, sys %S s, peak RSS %M KB" "$@"; }
echo "load: $(uptime)"
[ -d "$work/corpus" ] || python3 "$root/tools/make_protein_corpus.py" --mb "$mb" --files 8 --out "$work/corpus"
half=$(ls "$work"/corpus/*.fasta | head -4 | tr '\n' ',')
for spec in "$half" "$work/corpus/"; do
  rm -rf "$work/prep"
  echo "prepare ${spec:0:60}..."
  run "$bin" prepare --input "$spec" --output "$work/prep" --family esm2 --threads 2 --shard-mb 64 --quiet
done
echo "loader:"
run "$bin" bench-data --data "$work/prep" --family esm2 --seconds 10 --max-seq-length 1024 --max-tokens 16384
[ -f "$work/synthetic/manifest.json" ] || run "$bin" bench-data --synthetic "$records" --output "$work/synthetic" --length 12
echo "start-up on $records records:"
run "$bin" bench-data --data "$work/synthetic" --family esm2 --seconds 1 --no-verify
run "$bin" bench-data --data "$work/synthetic" --family esm2 --seconds 1
echo "train to the first step ($records records, CRC check off):"
run "$bin" train --config-dir "$root/configs" --config-name esm2_sanity output_dir="$work/run" dataset.path="$work/synthetic" \
  dataset.val_path= dataset.val_every_n_steps=0 dataset.verify_checksums=false num_train_steps=1 \
  model.config.num_hidden_layers=1 checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false \
  checkpoint.resume_from_checkpoint=false
