#!/usr/bin/env bash
# Data-parallel correctness on GPUs (needs 2): ESM-2 (8M shape, bf16-mixed) trained for 30
# steps as 1 GPU × 2 micro batches and as 2 GPUs × 1 micro batch with each strategy (and bf16
# gradient reduction under ddp, zero2 and fsdp, optimizer-state offload under ddp / zero1 / fsdp,
# and NCCL's socket transport); prints the largest relative loss and
# grad-norm difference per step against the one-GPU run, and resumes a 2-GPU zero2 checkpoint
# on 1 GPU. Then gradient accumulation where the gradients are sharded (zero2, fsdp reduce every
# micro batch into the owners' shards): 2 GPUs × 2 micro batches against 1 GPU × 4.
# Usage: bench/dist_gpu_check.sh BIN DATA OUT_DIR
set -uo pipefail
BIN=$1; DATA=$2; OUT=$3
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
common="train --config-name esm2_t6_8M dataset.path=$DATA device=cuda precision=bf16-mixed num_train_steps=30
  logger.frequency=1 checkpoint.save_every_n_steps=15 scheduler.warmup_steps=5 dataset.max_tokens_per_batch=8192"
run() { local name=$1; shift; echo "== $name"; timeout 300 "$@" > "$OUT/$name.log" 2>&1; echo "exit $?"; tail -2 "$OUT/$name.log"; }
run one $BIN $common output_dir=$OUT/one grad_acc_steps=2
for s in ddp zero1 zero2 fsdp; do
  run two_$s $BIN launch --nproc-per-node 2 $common output_dir=$OUT/two_$s distributed.strategy=$s
done
run two_ddp_bf16 $BIN launch --nproc-per-node 2 $common output_dir=$OUT/two_ddp_bf16 distributed.bf16_reduce=true
for s in zero2 fsdp; do
  run two_${s}_bf16 $BIN launch --nproc-per-node 2 $common output_dir=$OUT/two_${s}_bf16 distributed.strategy=$s \
    distributed.bf16_reduce=true
done
for s in ddp zero1 fsdp; do  # optimizer state (and fp32 masters) in host memory
  run two_${s}_offload $BIN launch --nproc-per-node 2 $common output_dir=$OUT/two_${s}_offload distributed.strategy=$s \
    optimizer.offload=true
done
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 run two_socket $BIN launch --nproc-per-node 2 $common output_dir=$OUT/two_socket
# zero2 checkpoint of step 15 resumed on one GPU (2 micro batches) to step 30
mkdir -p $OUT/moved/checkpoints && cp -r $OUT/two_zero2/checkpoints/step_15 $OUT/moved/checkpoints/
head -15 $OUT/two_zero2/metrics.jsonl > $OUT/moved/metrics.jsonl
run moved $BIN $common output_dir=$OUT/moved grad_acc_steps=2
run one_acc4 $BIN $common output_dir=$OUT/one_acc4 grad_acc_steps=4
for s in zero2 fsdp; do
  run two_${s}_acc2 $BIN launch --nproc-per-node 2 $common output_dir=$OUT/two_${s}_acc2 distributed.strategy=$s \
    grad_acc_steps=2
done
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def recs(name):
    p = os.path.join(out, name, "metrics.jsonl")
    if not os.path.exists(p): return []
    return [r for r in (json.loads(l) for l in open(p) if l.strip()) if "loss" in r]
print(f"{'run':16s} {'steps':>5s} {'max rel dloss':>14s} {'max rel dgnorm':>15s} {'final loss':>10s}")
for name in ["one", "two_ddp", "two_zero1", "two_zero2", "two_fsdp", "two_ddp_bf16", "two_zero2_bf16", "two_fsdp_bf16",
             "two_ddp_offload", "two_zero1_offload", "two_fsdp_offload", "two_socket", "moved",
             "one_acc4", "two_zero2_acc2", "two_fsdp_acc2"]:
    ref = recs("one_acc4" if "acc" in name else "one")
    r = recs(name)
    if not r or len(r) != len(ref):
        print(f"{name:16s} missing or incomplete ({len(r)} records)"); continue
    dl = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(r, ref))
    dg = max(abs(a["grad_norm"] - b["grad_norm"]) / max(abs(b["grad_norm"]), 1e-12) for a, b in zip(r, ref))
    print(f"{name:16s} {len(r):5d} {dl:14.2e} {dg:15.2e} {r[-1]['loss']:10.4f}")
PY
