#!/usr/bin/env bash
# Session 26 device command E (nvidia-h200-x4, four H200; biofm 4814b00): the first run on four
# GPUs. Same science: ESM-2 8M shape, 30 steps, 4 GPUs x 1 micro batch under ddp, zero2 and fsdp
# against 1 GPU x 4 micro batches (largest relative loss difference per step). Scaling: ESM-2
# 650M bf16 (the esm2_t33_650M config) on 1, 2 and 4 GPUs under ddp, tokens/s of steps 21-40.
set -u
mkdir -p build $OUT
xz -dc .carry/pack/biofm.xz > build/biofm && chmod +x build/biofm
export LD_LIBRARY_PATH=$PWD/.carry/pack/lib:${LD_LIBRARY_PATH:-} OMP_NUM_THREADS=8
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
S=$OUT/summary.txt
{ date -u; nvidia-smi --query-gpu=index,name,power.limit --format=csv,noheader; nvidia-smi topo -m | head -6; } > $S 2>&1
D=.carry/data/uniprot_20k.fasta.gz
common="train --config-name esm2_t6_8M dataset.path=$D device=cuda precision=bf16-mixed num_train_steps=30
  logger.frequency=1 checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false scheduler.warmup_steps=5 dataset.max_tokens_per_batch=8192"
run() { local name=$1; shift; timeout 120 "$@" output_dir=/tmp/c/$name > /tmp/$name.log 2>&1; echo "$name exit $?" >> $S; }
run one_acc4 build/biofm $common grad_acc_steps=4
for s in ddp zero2 fsdp; do run four_$s build/biofm launch --nproc-per-node 4 $common distributed.strategy=$s; done
python3 - >> $S <<'PY'
import json, os
def recs(n):
    p = f"/tmp/c/{n}/metrics.jsonl"
    return [r for r in (json.loads(l) for l in open(p) if l.strip()) if "loss" in r] if os.path.exists(p) else []
ref = recs("one_acc4")
for n in ["four_ddp", "four_zero2", "four_fsdp"]:
    r = recs(n)
    if not r or len(r) != len(ref): print(n, "missing or incomplete", len(r)); continue
    dl = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(r, ref))
    print(f"{n:12s} {len(r)} steps, max rel loss diff vs 1 GPU x 4: {dl:.2e}, final {r[-1]['loss']:.4f} (1 GPU: {ref[-1]['loss']:.4f})")
PY
C="num_train_steps=40 logger.frequency=20 logger.tensorboard=false checkpoint.save_every_n_steps=0 checkpoint.save_final_model=false checkpoint.resume_from_checkpoint=false dataset.val_every_n_steps=0"
TE="train --config-name esm2_t33_650M $C dataset.path=$D"
R() {  # tag, command...
  local tag=$1; shift; rm -rf /tmp/$tag
  timeout 75 "$@" output_dir=/tmp/$tag > /tmp/$tag.log 2>&1
  local rc=$?
  echo "$tag rc $rc $(tail -1 /tmp/$tag/metrics.jsonl 2>/dev/null | python3 -c "
import json, sys
try:
    r = json.loads(sys.stdin.read())
    print(' '.join(f'{k}={r[k]:.3f}' if isinstance(r[k], float) else f'{k}={r[k]}' for k in ('loss', 'step_time', 'tokens_per_sec', 'global_tokens_per_sec', 'gpu_mem_peak_gib') if k in r))
except Exception as e:
    print('no record', e)")" >> $S
  [ $rc -ne 0 ] && tail -3 /tmp/$tag.log | sed 's/^/    /' >> $S
}
R e_one build/biofm $TE
R e_two_ddp build/biofm launch --nproc-per-node 2 $TE distributed.strategy=ddp
R e_four_ddp build/biofm launch --nproc-per-node 4 $TE distributed.strategy=ddp
tar czf $OUT/logs.tgz /tmp/*.log /tmp/c/*/metrics.jsonl /tmp/e_*/metrics.jsonl 2>/dev/null
cat $S
