#!/usr/bin/env bash
# One GPU-machine session: build info, CUDA tests, ESM-2 throughput and the HF peer run.
# Usage (on the device, from the repo root): tools/gpu_session.sh BIN_DIR OUT_DIR [what...]
#   what: tests bench peer  (default: all)
set -uo pipefail
BIN=$1; OUT=$2; shift 2
WHAT=${*:-tests bench peer}
DATA=${DATA:-.carry/data/uniprot_20k.fasta.gz}
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
"$BIN/biofm" info | tee -a "$OUT/gpu.txt"
for w in $WHAT; do
  case $w in
    tests)
      "$BIN/biofm_cuda_tests" 2>&1 | tee "$OUT/cuda_tests.log" | grep -E "^\[  (PASSED|FAILED)|FAILED|\[cuda|\[curve" ;;
    bench)
      for shape in 35M 650M; do
        "$BIN/biofm" bench --model esm2 --shape $shape --data "$DATA" --tokens-per-batch 16384 \
          --steps 20 --warmup 8 --json "$OUT/ours_esm2_$shape.json" 2>&1 | tail -1
      done
      "$BIN/biofm" bench --model esm2 --shape 3B --data "$DATA" --tokens-per-batch 16384 --recompute \
        --steps 10 --warmup 5 --json "$OUT/ours_esm2_3B.json" 2>&1 | tail -1 ;;
    peer)
      python3 bench/hf_peer_bench.py --model esm2 --shape 650M --data "$DATA" --tokens-per-batch 16384 \
        --max-seq-length 1024 --steps 15 --warmup 5 --json "$OUT/hf_esm2_650M_eager.json" 2>&1 | tail -1 ;;
  esac
done
