#!/usr/bin/env bash
# Before/after throughput of two biofm binaries in one command on one GPU, runs interleaved
# (A, B, A, B, ...) so that clock and thermal drift hit both alike.
# Usage (device machine, repo root): bench/ab_compare.sh BIN_A BIN_B OUT_DIR [case...]
#   cases: esm650 esm650_fp8 esm3b llama1b llama1b_fp8 (default: all)
# A_ARGS / B_ARGS: extra arguments for one side (e.g. an older binary's --config-dir).
# Data: DATA (proteins, default .carry/pack/data/uniprot_20k.fasta.gz); DNA_LONG (long DNA
# records for 8192-token windows, made from the lambda phage + Shigella plasmid files).
set -uo pipefail
A=$1; B=$2; OUT=$3; shift 3
CASES=${*:-esm650 esm650_fp8 esm3b llama1b llama1b_fp8}
REPS=${REPS:-1}
DATA=${DATA:-.carry/pack/data/uniprot_20k.fasta.gz}
DNA_LONG=${DNA_LONG:-/tmp/dna_long.fasta}
mkdir -p "$OUT"
[ -s "$DNA_LONG" ] || zcat .carry/pack/data/lambda_phage.fa.gz .carry/pack/data/shigella_plasmids.fasta.gz > "$DNA_LONG"
args_of() {
  case $1 in
    esm650) echo "--model esm2 --shape 650M --data $DATA --tokens-per-batch 16384 --steps 20 --warmup 8" ;;
    esm650_fp8) echo "--model esm2 --shape 650M --data $DATA --tokens-per-batch 16384 --fp8 --steps 20 --warmup 8" ;;
    esm3b) echo "--model esm2 --shape 3B --data $DATA --tokens-per-batch 16384 --recompute --recompute-layers 12 --steps 8 --warmup 4" ;;
    llama1b) echo "--model llama --shape 1B --data $DNA_LONG --tokens-per-batch 8192 --max-seq-length 8192 --steps 20 --warmup 5" ;;
    llama1b_fp8) echo "--model llama --shape 1B --data $DNA_LONG --tokens-per-batch 8192 --max-seq-length 8192 --fp8 --steps 20 --warmup 5" ;;
    *) echo "unknown case $1" >&2; exit 2 ;;
  esac
}
for c in $CASES; do
  for r in $(seq 1 "$REPS"); do
    for side in A B; do
      bin=$A; extra=${A_ARGS:-}
      [ $side = B ] && bin=$B && extra=${B_ARGS:-}
      # shellcheck disable=SC2046,SC2086
      "$bin" bench $(args_of "$c") $extra --json "$OUT/${c}_${side}_${r}.json" 2>&1 | tail -1 | sed "s/^/[$c $side $r] /" | tee -a "$OUT/ab.txt"
    done
  done
done
python3 - "$OUT" <<'PY'
import json, glob, os, sys, collections
out = sys.argv[1]
runs = collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(os.path.join(out, "*_[AB]_*.json"))):
    case, side, _ = os.path.basename(f)[:-5].rsplit("_", 2)
    runs[case][side].append(json.load(open(f))["real_tokens_per_sec"])
for case, s in runs.items():
    if not s["A"] or not s["B"]:
        print(f"{case:12s} incomplete: {dict(s)}")
        continue
    a, b = sum(s["A"]) / len(s["A"]), sum(s["B"]) / len(s["B"])
    print(f"{case:12s} A {a:10.0f}  B {b:10.0f} tok/s  B/A {b / a:.4f}")
PY
