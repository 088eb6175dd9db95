#!/usr/bin/env bash
# Data-parallel scaling on one host with 2 GPUs (H200 x2): biofm and the PyTorch DDP peer
# (bench/hf_peer_bench.py under torchrun), 1 GPU against 2 GPUs, ESM-2 650M and Llama 1B.
#
# Usage:
#   bench/run_ddp_scaling.sh BIN OUT_DIR [esm2|llama|all] [--proteins FASTA] [--dna FASTA]
#     BIN        the biofm binary (e.g. build/biofm)
#     OUT_DIR    logs, metrics.jsonl files, JSON results and summary.json (small files only)
#     esm2|llama|all   which models (default all; run esm2 and llama as two calls when each
#                call must stay under 10 minutes)
#     --proteins FASTA  ESM-2 data (env PROTEINS, default .carry/pack/data/uniprot_20k.fasta.gz)
#     --dna FASTA       Llama data (env DNA, default .carry/pack/data/shigella_plasmids.fasta.gz)
#   Environment (optional): PYTHON (python3), TORCHRUN ("$PYTHON -m torch.distributed.run"),
#     BIOFM_STEPS (60), BIOFM_TIMEOUT_S (180), PEER_TIMEOUT_S (420),
#     PEER_ESM2_ARGS ("--steps 20 --warmup 8 --compile"), PEER_LLAMA_ARGS ("--steps 10 --warmup 4"),
#     SCRATCH (checkpoint scratch dir, default ${TMPDIR:-/tmp}/biofm-ddp-scaling, emptied per run).
#
# Runs, per model (C = esm2_t33_650M or llama3_1b):
#   biofm   1 GPU       BIN train --config-name C num_train_steps=60 logger.frequency=20 ...
#   biofm   2 GPUs      BIN launch --nproc-per-node 2 train ... distributed.strategy=ddp
#                       ... distributed.bf16_reduce=true
#                       "two nodes": NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 (NCCL over sockets),
#                       without and with bf16_reduce
#   torch   1 GPU       python3 bench/hf_peer_bench.py ... (--group-by-length for ESM-2)
#   torch   2 GPUs      torchrun --standalone --nproc-per-node 2 bench/hf_peer_bench.py ...
#                       and the same over sockets
# NCCL_NVLS_ENABLE=0 is exported for every run. Each run has its own timeout; a failed or
# timed-out run is reported in the table and the others still run (exit status 1 at the end).
# biofm throughput: the last metrics.jsonl record (steps 41-60): tokens_per_sec on 1 GPU,
# global_tokens_per_sec / 2 on 2 GPUs. Torch: real_tokens_per_sec on 1 GPU,
# tokens_per_sec_per_gpu on 2 GPUs. Scaling efficiency = per-GPU(2) / per-GPU(1).
set -uo pipefail
export PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0

if [[ $# -lt 2 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
BIN=$1; OUT=$2; shift 2
WHICH=all
if [[ $# -gt 0 && "$1" != --* ]]; then WHICH=$1; shift; fi
PROTEINS=${PROTEINS:-.carry/pack/data/uniprot_20k.fasta.gz}
DNA=${DNA:-.carry/pack/data/shigella_plasmids.fasta.gz}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --proteins) PROTEINS=$2; shift 2;;
    --dna) DNA=$2; shift 2;;
    *) echo "unknown option: $1" >&2; exit 2;;
  esac
done
case "$WHICH" in
  esm2) MODELS=(esm2);; llama) MODELS=(llama);; all) MODELS=(esm2 llama);;
  *) echo "third argument must be esm2, llama or all" >&2; exit 2;;
esac

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PY=${PYTHON:-python3}
read -r -a TORCHRUN <<< "${TORCHRUN:-$PY -m torch.distributed.run}"
BIOFM_STEPS=${BIOFM_STEPS:-60}
BIOFM_TIMEOUT_S=${BIOFM_TIMEOUT_S:-180}
PEER_TIMEOUT_S=${PEER_TIMEOUT_S:-300}
BUDGET_S=${BUDGET_S:-540}    # the whole script: runs that do not fit are cut short or skipped
MIN_RUN_S=${MIN_RUN_S:-45}
# ESM-2 batches change shape every step: torch.compile pays off (1.8x eager on the H100,
# bench/README.md). Whole-model compilation of the 650M model took minutes per run (more under
# DDP, whose graph Dynamo splits at bucket boundaries), which does not fit the budget, so the
# peer compiles each transformer layer (PyTorch's regional compilation) with dynamic shapes
# from the first step; PEER_ESM2_ARGS="--steps 20 --warmup 8 --compile --compile-dynamic"
# compiles the whole model instead (allow PEER_TIMEOUT_S=600 and BUDGET_S for it).
# Llama 1B: eager was faster than compiled on the H100 (42.4k vs 38.0k tok/s) and needs no
# compile time; PEER_LLAMA_ARGS="--steps 10 --warmup 4 --compile" compiles it.
read -r -a PEER_ESM2_ARGS <<< \
  "${PEER_ESM2_ARGS:---steps 20 --warmup 8 --compile --compile-regional --compile-dynamic}"
read -r -a PEER_LLAMA_ARGS <<< "${PEER_LLAMA_ARGS:---steps 10 --warmup 4}"
SCRATCH=${SCRATCH:-${TMPDIR:-/tmp}/biofm-ddp-scaling}
# "two nodes" on one host: NCCL may use neither NVLink (P2P) nor shared memory, so it goes
# through its network transport (sockets, or InfiniBand/RoCE where the host has such NICs: the
# log line "Using network ..." says which, and the table shows it). TWO_NODE_ENV replaces the
# two variables (e.g. add NCCL_IB_DISABLE=1).
TWO_NODE_ENV=${TWO_NODE_ENV:-NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1}
TWO_NODE_ENV="$TWO_NODE_ENV NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET"

[[ -x "$BIN" ]] || { echo "biofm binary not found or not executable: $BIN" >&2; exit 2; }
for m in "${MODELS[@]}"; do
  f=$PROTEINS; [[ $m == llama ]] && f=$DNA
  [[ -f "$f" ]] || { echo "data file not found for $m: $f" >&2; exit 2; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
: > "$OUT/runs.tsv"  # name, model, engine, gpus, variant, status, seconds, result file

FAILED=0
DEADLINE=$((SECONDS + BUDGET_S))
# run NAME MODEL ENGINE GPUS VARIANT TIMEOUT RESULT -- [VAR=VALUE ...] COMMAND ...
# (RESULT: the metrics.jsonl or JSON file the table reads). The timeout is cut to what is left
# of BUDGET_S; with less than MIN_RUN_S left the run is skipped.
run() {
  local name=$1 model=$2 engine=$3 gpus=$4 variant=$5 limit=$6 result=$7; shift 8
  local envs=()
  while [[ $# -gt 0 && "$1" == *=* && "$1" != -* ]]; do envs+=("$1"); shift; done
  local log="$OUT/$name.log" t0=$SECONDS rc status left=$((DEADLINE - SECONDS))
  if (( left - 25 < limit )); then limit=$((left - 25)); fi  # 25 s for the -k grace and the rest
  if (( left - 25 < MIN_RUN_S )); then
    echo "=== $name: skipped (${left} s left of BUDGET_S=$BUDGET_S)" | tee "$log"
    status=skipped; FAILED=1
  else
    echo "=== $name (timeout ${limit}s): ${envs[*]} $*" | tee "$log"
    # -k: SIGKILL 20 s after the SIGTERM if the run does not stop (biofm stops after its step)
    env "${envs[@]}" timeout -k 20 "$limit" "$@" < /dev/null >> "$log" 2>&1
    rc=$?
    case $rc in
      0) status=ok;;
      124|137) status=timeout; FAILED=1;;
      *) status="failed($rc)"; FAILED=1;;
    esac
    tail -n 3 "$log"
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$model" "$engine" "$gpus" "$variant" \
    "$status" "$((SECONDS - t0))" "$result" >> "$OUT/runs.tsv"
  echo "=== $name: $status in $((SECONDS - t0)) s"
}

# biofm MODEL NAME GPUS VARIANT "OVERRIDES" "VAR=VALUE ..."
biofm() {
  local model=$1 name=$2 gpus=$3 variant=$4 extra=$5 env_list=$6 cfg data launch=()
  if [[ $model == esm2 ]]; then cfg=esm2_t33_650M; data=$PROTEINS; else cfg=llama3_1b; data=$DNA; fi
  [[ $gpus == 1 ]] || launch=(launch --nproc-per-node "$gpus")
  rm -rf "${OUT:?}/$name" "${SCRATCH:?}/$name"
  # checkpoints (none planned; a SIGTERM from timeout writes one) go to SCRATCH, not to OUT
  # shellcheck disable=SC2086  # the override and environment lists are split on purpose
  run "$name" "$model" biofm "$gpus" "$variant" "$BIOFM_TIMEOUT_S" "$OUT/$name/metrics.jsonl" -- \
    $env_list "$BIN" "${launch[@]}" train --config-name "$cfg" num_train_steps="$BIOFM_STEPS" \
    logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 \
    checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false \
    checkpoint.ckpt_dir="$SCRATCH/$name" dataset.path="$data" output_dir="$OUT/$name" $extra
  rm -rf "${SCRATCH:?}/$name"
  if [[ -d "$OUT/$name" ]]; then
    find "$OUT/$name" -mindepth 1 -not -name metrics.jsonl -delete 2>/dev/null
  fi
  return 0
}

# peer MODEL NAME GPUS VARIANT "VAR=VALUE ..."
peer() {
  local model=$1 name=$2 gpus=$3 variant=$4 env_list=$5 args launcher
  if [[ $model == esm2 ]]; then
    args=(--model esm2 --shape 650M --data "$PROTEINS" --tokens-per-batch 16384
          --max-seq-length 1024 --group-by-length "${PEER_ESM2_ARGS[@]}")
  else
    args=(--model llama --shape 1B --data "$DNA" --seq-length 8192 --micro-batch 1
          "${PEER_LLAMA_ARGS[@]}")
  fi
  if [[ $gpus == 1 ]]; then
    launcher=(CUDA_VISIBLE_DEVICES=0 "$PY")
  else
    launcher=("${TORCHRUN[@]}" --standalone --nproc-per-node "$gpus")
  fi
  rm -f "$OUT/$name.json"
  # shellcheck disable=SC2086  # the environment list is split on purpose
  run "$name" "$model" torch "$gpus" "$variant" "$PEER_TIMEOUT_S" "$OUT/$name.json" -- \
    $env_list "${launcher[@]}" "$HERE/hf_peer_bench.py" "${args[@]}" --json "$OUT/$name.json"
}

summarize() {
  "$PY" - "$OUT" <<'EOF'
import json, os, sys
out = sys.argv[1]
rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(out, "runs.tsv")) if line.strip()]

def last_record(path):  # the last metrics.jsonl record that has a throughput
    rec = None
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "tokens_per_sec" in r:
            rec = r
    return rec

def per_gpu(engine, gpus, path):
    """(per-GPU tokens/s, global tokens/s, note) or (None, None, why)."""
    if not os.path.exists(path):
        return None, None, "no result file"
    if engine == "biofm":
        r = last_record(path)
        if r is None:
            return None, None, "no throughput record"
        if gpus == 1:
            return r["tokens_per_sec"], r["tokens_per_sec"], f"step {r.get('step')}"
        if "global_tokens_per_sec" not in r:
            return None, None, "no global_tokens_per_sec"
        ranks = r.get("rank_tokens_per_sec") or []
        note = f"step {r.get('step')}; ranks " + " / ".join(f"{x:,.0f}" for x in ranks)
        return r["global_tokens_per_sec"] / gpus, r["global_tokens_per_sec"], note
    try:
        d = json.load(open(path))
    except ValueError as e:
        return None, None, f"bad JSON: {e}"
    if d.get("status") != "ok":
        return None, None, d.get("error", d.get("status"))
    if gpus == 1:
        return d["real_tokens_per_sec"], d["real_tokens_per_sec"], \
            f"{d['padding_fraction']:.0%} padding" if d["model"] == "esm2" else ""
    ranks = " / ".join(f"{x:,.0f}" for x in d["rank_real_tokens_per_sec"])
    note = f"ranks {ranks}"
    if d["model"] == "esm2":
        note += f"; {d['global_padding_fraction']:.0%} padding"
    return d["tokens_per_sec_per_gpu"], d["global_real_tokens_per_sec"], note

def network(name):  # NCCL's network transport, from an NCCL_DEBUG=INFO log
    try:
        for line in open(os.path.join(out, name + ".log"), errors="replace"):
            if "NCCL INFO Using network" in line:
                return line.split("Using network", 1)[1].strip()
    except OSError:
        pass
    return None

table, base = [], {}
for name, model, engine, gpus, variant, status, secs, path in rows:
    gpus = int(gpus)
    pg, glob, note = per_gpu(engine, gpus, path)
    if status != "ok":
        note = f"{status}; {note}" if pg is not None else f"{status}; see {name}.log"
    net = network(name)
    if net:
        note += f"; NCCL network {net}"
    table.append(dict(name=name, model=model, engine=engine, gpus=gpus, variant=variant,
                      status=status, seconds=int(secs), per_gpu_tokens_per_sec=pg,
                      global_tokens_per_sec=glob, note=note))
    if gpus == 1 and pg:
        base[(model, engine)] = pg
for t in table:
    b = base.get((t["model"], t["engine"]))
    t["scaling_efficiency"] = (t["per_gpu_tokens_per_sec"] / b
                               if t["gpus"] > 1 and b and t["per_gpu_tokens_per_sec"] else None)

fmt = lambda v, f: "n/a" if v is None else f.format(v)
hdr = (f"{'model':<6} {'engine':<6} {'variant':<26} {'GPUs':>4} {'tok/s per GPU':>14} "
       f"{'tok/s total':>12} {'efficiency':>10} {'time':>6}  notes")
print("\n" + hdr + "\n" + "-" * len(hdr))
for t in table:
    print(f"{t['model']:<6} {t['engine']:<6} {t['variant']:<26} {t['gpus']:>4} "
          f"{fmt(t['per_gpu_tokens_per_sec'], '{:,.0f}'):>14} "
          f"{fmt(t['global_tokens_per_sec'], '{:,.0f}'):>12} "
          f"{fmt(t['scaling_efficiency'], '{:.1%}'):>10} {t['seconds']:>5}s  {t['note']}")
print("efficiency = tokens/s per GPU on 2 GPUs / tokens/s on 1 GPU, same engine. biofm: packed "
      "(THD) tokens, last logging window (steps 41-60); torch: real (non-pad) tokens over its "
      "timed steps. Compare engines' absolute tokens/s with bench/run_peer_comparison.sh.")
with open(os.path.join(out, "summary.json"), "w") as f:
    json.dump(table, f, indent=2)
    f.write("\n")
print(f"wrote {os.path.join(out, 'summary.json')}")
EOF
}

# The runs that the scaling efficiencies need come first, the variants after them, so that a
# short budget loses variants rather than the main figures. The table is printed after each
# model (so it is there even when a later model runs out of time).
T0=$SECONDS
for m in "${MODELS[@]}"; do
  biofm "$m" "biofm_${m}_1gpu" 1 "1 GPU" "" ""
  biofm "$m" "biofm_${m}_2gpu" 2 "ddp" "distributed.strategy=ddp" ""
  peer "$m" "torch_${m}_1gpu" 1 "1 GPU" ""
  peer "$m" "torch_${m}_2gpu" 2 "ddp" ""
  biofm "$m" "biofm_${m}_2gpu_bf16" 2 "ddp bf16 reduce" \
    "distributed.strategy=ddp distributed.bf16_reduce=true" ""
  biofm "$m" "biofm_${m}_2gpu_socket" 2 "ddp, sockets" "distributed.strategy=ddp" "$TWO_NODE_ENV"
  biofm "$m" "biofm_${m}_2gpu_socket_bf16" 2 "ddp bf16 reduce, sockets" \
    "distributed.strategy=ddp distributed.bf16_reduce=true" "$TWO_NODE_ENV"
  peer "$m" "torch_${m}_2gpu_socket" 2 "ddp, sockets" "$TWO_NODE_ENV"
  summarize
done
echo "=== all runs done in $((SECONDS - T0)) s"
rm -rf "${SCRATCH:?}"
exit $FAILED
