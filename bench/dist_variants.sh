#!/usr/bin/env bash
# biofm data-parallel variants against one GPU: CONFIG trained on 1 GPU, then on 2 GPUs once per
# variant ("name|overrides|env"), 40 steps each; prints tokens/s per GPU and the efficiency
# (per GPU on 2 / on 1) from the last logging window (steps 31-40).
# Usage: bench/dist_variants.sh BIN CONFIG DATA OUT "common overrides" "name|overrides|env" ...
# e.g.   bench/dist_variants.sh build/biofm esm2_t33_650M prot.fa out "" "ddp||" "sms4|distributed.comm_sms=4|"
#        "sockets||NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"
set -uo pipefail
BIN=$1; CFG=$2; DATA=$3; OUT=$4; COMMON=$5; shift 5
export NCCL_NVLS_ENABLE=0
C="train --config-name $CFG num_train_steps=40 logger.frequency=10 logger.tensorboard=false checkpoint.save_every_n_steps=0
  checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.path=$DATA $COMMON"
mkdir -p "$OUT"
timeout 150 $BIN $C output_dir=$OUT/one checkpoint.ckpt_dir=$OUT/ck_one > $OUT/one.log 2>&1 || echo "1 GPU failed: $(tail -2 $OUT/one.log)"
names=()
for v in "$@"; do
  IFS='|' read -r name ovr envs <<< "$v"
  names+=("$name")
  env $envs timeout 150 $BIN launch --nproc-per-node 2 $C $ovr output_dir=$OUT/$name checkpoint.ckpt_dir=$OUT/ck_$name \
    > $OUT/$name.log 2>&1 || echo "$name failed: $(tail -2 $OUT/$name.log)"
done
python3 - "$OUT" "$CFG" "$COMMON" "${names[@]}" <<'PY'
import json, os, sys
out, cfg, common, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
def last(n):
    p = f"{out}/{n}/metrics.jsonl"
    if not os.path.exists(p): return None
    recs = [r for r in (json.loads(l) for l in open(p) if l.strip()) if "tokens_per_sec" in r]
    return recs[-1] if recs else None
one = last("one")
if one is None: sys.exit(f"{cfg}: the 1-GPU run has no metrics")
mem = lambda r: f", peak {r['gpu_mem_peak_gib']:.1f} GiB" if "gpu_mem_peak_gib" in r else ""
print(f"{cfg} [{common}] 1 GPU: {one['tokens_per_sec']:,.0f} tok/s, MFU {one['mfu_seed']:.1%}{mem(one)}")
for n in names:
    r = last(n)
    if r is None: print(f"  {n:14s} no metrics"); continue
    g = r["global_tokens_per_sec"] / 2
    ranks = ", ".join(f"{x:,.0f}" for x in r["rank_tokens_per_sec"])
    print(f"  {n:14s} 2 GPUs: {g:,.0f} tok/s per GPU (ranks {ranks}), efficiency {g / one['tokens_per_sec']:.1%}, "
          f"MFU {r.get('mfu_seed', 0):.1%}{mem(r)} (rank 0)")
PY
