#!/usr/bin/env bash
# Run biofm and the Hugging Face peer (eager and torch.compile) on the same GPU, same data, same
# batch budget, then print a table with ratios ours/HF.
#
# Usage:
#   bench/run_peer_comparison.sh BIN [options]
#     --model esm2|llama        (default esm2)
#     --shape SHAPE             (default 650M for esm2, 1B for llama)
#     --data FASTA              (default data/proteins_sample.fasta / data/dna_sample.fasta)
#     --tokens-per-batch N      esm2 (default 16384)
#     --max-seq-length N        esm2 (default 1024)
#     --seq-length N            llama (default 8192)
#     --micro-batch N           llama (default 1)
#     --steps N --warmup N      HF timed/untimed steps (default 30/10 esm2, 20/5 llama)
#     --out DIR                 where the JSON files go (default bench/out/<model>-<shape>, git-ignored)
#     --python PY               (default python3)
#     --skip-ours | --skip-eager | --skip-compile
#     --ours-args "ARGS"        extra arguments for `BIN bench` (e.g. "--steps 30 --warmup 10")
#     --hf-args "ARGS"          extra arguments for bench/hf_peer_bench.py (e.g. "--recompute")
#
# Ours:  BIN bench --model M --shape S --data D (--tokens-per-batch N | --seq-length N --micro-batch N)
#            --json DIR/ours.json
#        expected JSON keys: real_tokens_per_sec, step_time_s, mfu_seed, mfu_6n, peak_mem_gib
# HF:    python3 bench/hf_peer_bench.py ... --json DIR/hf_eager.json   (and --compile → hf_compile.json)
#        (ESM-2 with --group-by-length, as HF Trainer's group_by_length=True)
# A failing run is reported and the others still run; the script exits 1 if any run failed
# (an HF out-of-memory is not a failure: it is reported as OOM in the table).
set -euo pipefail
export PYTHONUNBUFFERED=1

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
BIN=$1; shift
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

MODEL=esm2; SHAPE=""; DATA=""; TPB=16384; MSL=1024; SEQ=8192; MB=1
STEPS=""; WARMUP=""; OUT=""; PY=python3
SKIP_OURS=0; SKIP_EAGER=0; SKIP_COMPILE=0; OURS_ARGS=""; HF_ARGS=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL=$2; shift 2;;
    --shape) SHAPE=$2; shift 2;;
    --data) DATA=$2; shift 2;;
    --tokens-per-batch) TPB=$2; shift 2;;
    --max-seq-length) MSL=$2; shift 2;;
    --seq-length) SEQ=$2; shift 2;;
    --micro-batch) MB=$2; shift 2;;
    --steps) STEPS=$2; shift 2;;
    --warmup) WARMUP=$2; shift 2;;
    --out) OUT=$2; shift 2;;
    --python) PY=$2; shift 2;;
    --skip-ours) SKIP_OURS=1; shift;;
    --skip-eager) SKIP_EAGER=1; shift;;
    --skip-compile) SKIP_COMPILE=1; shift;;
    --ours-args) OURS_ARGS=$2; shift 2;;
    --hf-args) HF_ARGS=$2; shift 2;;
    *) echo "unknown option: $1" >&2; exit 2;;
  esac
done

case "$MODEL" in
  esm2)
    SHAPE=${SHAPE:-650M}; DATA=${DATA:-data/proteins_sample.fasta}
    STEPS=${STEPS:-30}; WARMUP=${WARMUP:-10}
    SHAPE_ARGS=(--tokens-per-batch "$TPB")
    # --group-by-length: what a user of HF Trainer turns on for variable-length proteins
    # (group_by_length=True): much less padding than batching in file order
    HF_SHAPE_ARGS=(--tokens-per-batch "$TPB" --max-seq-length "$MSL" --group-by-length)
    ;;
  llama)
    SHAPE=${SHAPE:-1B}; DATA=${DATA:-data/dna_sample.fasta}
    STEPS=${STEPS:-20}; WARMUP=${WARMUP:-5}
    SHAPE_ARGS=(--seq-length "$SEQ" --micro-batch "$MB")
    HF_SHAPE_ARGS=("${SHAPE_ARGS[@]}")
    ;;
  *) echo "--model must be esm2 or llama" >&2; exit 2;;
esac
OUT=${OUT:-bench/out/$MODEL-$SHAPE}
mkdir -p "$OUT"
[[ -f "$DATA" ]] || { echo "data file not found: $DATA" >&2; exit 2; }

FAILED=0
run() {  # name, log, command...
  local name=$1 log=$2; shift 2
  echo "=== $name: $*"
  if "$@" 2>&1 | tee "$log"; then
    return 0
  else
    echo "=== $name FAILED (see $log)" >&2
    FAILED=1
    return 0
  fi
}

rm -f "$OUT/ours.json" "$OUT/hf_eager.json" "$OUT/hf_compile.json"
if [[ $SKIP_OURS == 0 ]]; then
  # shellcheck disable=SC2086  # OURS_ARGS is split on purpose
  run ours "$OUT/ours.log" "$BIN" bench --model "$MODEL" --shape "$SHAPE" --data "$DATA" \
    "${SHAPE_ARGS[@]}" --json "$OUT/ours.json" $OURS_ARGS
fi
HF=("$PY" "$HERE/hf_peer_bench.py" --model "$MODEL" --shape "$SHAPE" --data "$DATA"
    "${HF_SHAPE_ARGS[@]}" --steps "$STEPS" --warmup "$WARMUP")
if [[ $SKIP_EAGER == 0 ]]; then
  # shellcheck disable=SC2086
  run hf-eager "$OUT/hf_eager.log" "${HF[@]}" --json "$OUT/hf_eager.json" $HF_ARGS
fi
if [[ $SKIP_COMPILE == 0 ]]; then
  # shellcheck disable=SC2086
  run hf-compile "$OUT/hf_compile.log" "${HF[@]}" --compile --json "$OUT/hf_compile.json" $HF_ARGS
fi

"$PY" - "$OUT" "$MODEL-$SHAPE" <<'EOF'
import json, os, sys
out, name = sys.argv[1], sys.argv[2]
def load(f):
    p = os.path.join(out, f)
    if not os.path.exists(p):
        return None
    try:
        return json.load(open(p))
    except Exception as e:
        print(f"(cannot read {p}: {e})")
        return None
runs = [("ours", load("ours.json")), ("HF eager", load("hf_eager.json")), ("HF compile", load("hf_compile.json"))]
keys = [("real tok/s", "real_tokens_per_sec", "{:,.0f}", True),
        ("step s", "step_time_s", "{:.3f}", False),
        ("MFU seed %", "mfu_seed", "{:.1%}", True),
        ("MFU 6N %", "mfu_6n", "{:.1%}", True),
        ("peak GiB", "peak_mem_gib", "{:.1f}", False)]
def ok(d):
    return d is not None and d.get("status", "ok") == "ok"
def cell(d, k, fmt):
    if d is None: return "n/a"
    if d.get("status") == "oom": return "OOM"
    v = d.get(k)
    return "n/a" if v is None else fmt.format(v)
hdr = f"{name:<14}" + "".join(f"{label:>14}" for label, *_ in keys)
print("\n" + hdr); print("-" * len(hdr))
for label, d in runs:
    print(f"{label:<14}" + "".join(f"{cell(d, k, fmt):>14}" for _, k, fmt, _ in keys))
ours = runs[0][1]
for label, d in runs[1:]:
    r = f"ours/{label[3:]}"
    cells = []
    for _, k, fmt, _ in keys:
        if ok(ours) and ok(d) and ours.get(k) and d.get(k):
            cells.append(f"{ours[k] / d[k]:.2f}x")
        else:
            cells.append("n/a")
    print(f"{r:<14}" + "".join(f"{c:>14}" for c in cells))
for label, d in runs[1:]:
    if d and d.get("status") == "oom":
        print(f"{label}: {d.get('error')}")
    elif ok(d) and "padding_fraction" in d and d["padding_fraction"] > 0:
        print(f"{label}: {d['padding_fraction']:.1%} of batch slots were padding; "
              f"mfu_seed counts padded work (unpadded-equivalent {d['mfu_seed_unpadded']:.1%})")
    if ok(d) and d.get("recompiles_during_timed"):
        print(f"{label}: WARNING {d['recompiles_during_timed']} recompiles during timed steps")
        x = d.get("real_tokens_per_sec_excluding_compiling_steps")
        if x:
            r = f" (ours/that {ours['real_tokens_per_sec'] / x:.2f}x)" if ok(ours) else ""
            print(f"{label}: over the timed steps that did not compile "
                  f"({len(d['timed_steps_that_compiled'])} did): {x:,.0f} real tok/s{r}")
print("ratios: throughput and MFU > 1 means ours is better; step time and memory < 1 means ours is better")
EOF
exit $FAILED
