#!/usr/bin/env python3
"""Hugging Face + PyTorch peer benchmark for biofm (ESM-2 masked LM, Llama-3 DNA causal LM).

Trains a randomly initialised Hugging Face model (built from a config, nothing is downloaded)
on real sequences from a FASTA file, the way a typical user would: bf16 autocast over fp32
parameters, SDPA attention, fused AdamW, grad-norm clipping, batches padded to their longest
member (ESM-2). Times `--steps` steps after `--warmup` untimed ones and reports throughput,
padding, step time, MFU and peak memory.

Usage (GPU):
  python3 bench/hf_peer_bench.py --model esm2 --shape 650M --data data/proteins_sample.fasta \
      --tokens-per-batch 16384 --max-seq-length 1024 --steps 30 --warmup 10 [--compile] [--json OUT.json]
  python3 bench/hf_peer_bench.py --model llama --shape 1B --data data/dna_sample.fasta \
      --seq-length 8192 --micro-batch 1 --steps 20 --warmup 5 [--compile] [--recompute]
  torchrun --standalone --nproc-per-node 2 bench/hf_peer_bench.py ... [--ddp-bf16-compress]
      (PyTorch DistributedDataParallel, one process per GPU; each rank trains on its own share
      of the batches, the same number of steps and batch budget per rank as a single-GPU run)
CPU smoke test (fp32 on CPU unless --cpu-autocast; bf16 autocast on CPU is very slow):
  python3 bench/hf_peer_bench.py --device cpu --model esm2 --shape 8M --steps 2 --warmup 1 ...
  (under torchrun with --device cpu the ranks talk through Gloo instead of NCCL)

Metrics (all over the timed steps only; T = wall time of the timed region, measured with
torch.cuda.synchronize() + time.perf_counter() around all timed steps):
  real_tokens_per_sec    sum of non-pad tokens (incl. <cls>/<eos>, BOS/EOS) / T
  padded_tokens_per_sec  sum of B*S (batch rows x padded length) / T
  padding_fraction       1 - real / padded
  step_time_s            median per-step time from CUDA events (step_time_mean_s = T / steps)
  mfu_seed               sum over steps of ((24*B*S*H^2 + 4*B*S^2*H)*3*L + 6*B*S*H*V) / T / peak,
                         B, S = that step's rows and *padded* length (the BioNeMo seed formula;
                         counts the FLOPs actually executed on padding as useful)
  mfu_seed_unpadded      the same formula summed per sequence with its real length (what a
                         packed/THD engine doing only useful work would be credited with)
  mfu_6n                 6 * N * real_tokens_per_sec / peak   (N = unique parameter count)
  mfu_6n_padded          6 * N * padded_tokens_per_sec / peak
  peak = 989e12 (H100/H200 dense bf16), --peak-tflops to change.
  peak_mem_gib           torch.cuda.max_memory_allocated() / 2^30 (whole run, incl. optimizer state)
Under torchrun (WORLD_SIZE > 1) the keys above are rank 0's own (its batches, its memory) and
T is the same for every rank (barrier + synchronize at both ends of the timed region); added:
  global_real_tokens_per_sec   sum over ranks of real tokens / T
  tokens_per_sec_per_gpu       global_real_tokens_per_sec / world_size
  rank_real_tokens_per_sec     each rank's real tokens / T (list, by rank)
"""

import argparse
import contextlib
import gzip
import json
import math
import os
import platform
import random
import statistics
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import transformers  # noqa: E402

# ----------------------------------------------------------------------------- shapes

ESM_SHAPES = {  # layers, hidden, heads, ffn   (facebook/esm2_t*_UR50D)
    "8M": (6, 320, 20, 1280),
    "35M": (12, 480, 20, 1920),
    "150M": (30, 640, 20, 2560),
    "650M": (33, 1280, 20, 5120),
    "3B": (36, 2560, 40, 10240),
    "15B": (48, 5120, 40, 20480),
}
LLAMA_SHAPES = {  # layers, hidden, heads, kv heads, ffn, tied
    "tiny": (2, 256, 4, 2, 512, False),
    "1B": (16, 2048, 32, 8, 8192, False),   # Llama-3.2-1B shape, DNA vocab 256
    "7B": (32, 4096, 32, 8, 14336, False),  # OpenGenome2 7B
}

ESM_VOCAB = [
    "<cls>", "<pad>", "<eos>", "<unk>",
    "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K", "Q", "N", "F", "Y", "M", "H",
    "W", "C", "X", "B", "U", "Z", "O", ".", "-", "<null_1>", "<mask>",
]
ESM_CLS, ESM_PAD, ESM_EOS, ESM_UNK, ESM_MASK = 0, 1, 2, 3, 32
ESM_V = 33
# single-character tokens 4..30; case-insensitive (as biofm's tokenizer); anything else -> <unk>
_ESM_TABLE = [ESM_UNK] * 256
for _i, _t in enumerate(ESM_VOCAB):
    if len(_t) == 1:
        _ESM_TABLE[ord(_t)] = _i
        _ESM_TABLE[ord(_t.lower())] = _i

DNA_BOS, DNA_EOS, DNA_V = 2, 0, 256

GIB = float(1 << 30)


# ----------------------------------------------------------------------------- data

def read_fasta(path):
    """Sequences in file order (plain or .gz). Headers dropped, lines joined, whitespace removed."""
    opener = gzip.open if path.endswith(".gz") else open
    seqs, cur, seen_header = [], [], False
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith(">"):
                if seen_header and cur:
                    seqs.append("".join(cur))
                cur, seen_header = [], True
                continue
            if not seen_header:
                raise SystemExit(f"{path}: sequence data before the first '>' header")
            cur.append("".join(line.split()))
    if seen_header and cur:
        seqs.append("".join(cur))
    if not seqs:
        raise SystemExit(f"{path}: no sequences")
    return seqs


def esm_tokenize(seq, max_len):
    """<cls> SEQ <eos>, SEQ truncated to max_len - 2 residues (HF truncation=True, max_length)."""
    body = seq[: max_len - 2]
    return [ESM_CLS] + [_ESM_TABLE[ord(c)] if ord(c) < 256 else ESM_UNK for c in body] + [ESM_EOS]


def esm_group(lengths, tokens_per_batch):
    """Greedy grouping in order: a batch grows while (n_seqs) * (longest) <= tokens_per_batch."""
    groups, cur, cur_max = [], [], 0
    for i, n in enumerate(lengths):
        new_max = max(cur_max, n)
        if cur and (len(cur) + 1) * new_max > tokens_per_batch:
            groups.append(cur)
            cur, new_max = [], n
        cur.append(i)
        cur_max = new_max
    if cur:
        groups.append(cur)
    return groups


def esm_mlm(ids, gen, mlm_p=0.15):
    """HF DataCollatorForLanguageModeling: p=0.15 of non-special tokens selected; 80% <mask>,
    10% random id in [0, 33) (HF draws from the whole vocab), 10% unchanged. Labels -100 elsewhere."""
    special = (ids == ESM_CLS) | (ids == ESM_EOS) | (ids == ESM_PAD)
    labels = ids.clone()
    prob = torch.full(ids.shape, mlm_p)
    prob.masked_fill_(special, 0.0)
    sel = torch.bernoulli(prob, generator=gen).bool()
    labels[~sel] = -100
    inp = ids.clone()
    to_mask = torch.bernoulli(torch.full(ids.shape, 0.8), generator=gen).bool() & sel
    inp[to_mask] = ESM_MASK
    to_rand = torch.bernoulli(torch.full(ids.shape, 0.5), generator=gen).bool() & sel & ~to_mask
    inp[to_rand] = torch.randint(ESM_V, ids.shape, generator=gen)[to_rand]
    return inp, labels


def esm_length_groups(lengths, args, epoch):
    """--group-by-length (HF Trainer's group_by_length / LengthGroupedSampler): sequences in a
    fixed-seed random order, cut into mega-chunks of mega_batch_mult x the batch size, each chunk
    sorted by length (longest first) and grouped with the token budget; no batch spans two chunks.
    The batch size in sequences is the number of full-length sequences the budget holds
    (tokens_per_batch // max_seq_length), so a chunk is 50 x 16 = 800 sequences by default."""
    order = list(range(len(lengths)))
    random.Random(args.seed + epoch).shuffle(order)
    chunk = args.mega_batch_mult * max(1, args.tokens_per_batch // args.max_seq_length)
    groups = []
    for c in range(0, len(order), chunk):
        members = sorted(order[c:c + chunk], key=lambda i: lengths[i], reverse=True)
        for g in esm_group([lengths[i] for i in members], args.tokens_per_batch):
            groups.append([members[k] for k in g])
    return groups


def esm_batches(args, n_needed):
    seqs = read_fasta(args.data)
    toks = [esm_tokenize(s, args.max_seq_length) for s in seqs]
    lengths = [len(t) for t in toks]
    gen = torch.Generator().manual_seed(args.seed)
    batches, epoch = [], 0
    while len(batches) < n_needed:
        if args.group_by_length:
            groups = esm_length_groups(lengths, args, epoch)
        else:  # file order (or one fixed-seed shuffle per epoch), grouped greedily in that order
            order = list(range(len(toks)))
            if args.shuffle:
                random.Random(args.seed + epoch).shuffle(order)
            groups = [[order[i] for i in g] for g in esm_group([lengths[i] for i in order],
                                                               args.tokens_per_batch)]
        for g in groups:
            rows = [toks[i] for i in g]
            S = max(len(r) for r in rows)
            if args.pad_to_multiple_of > 1:
                S = -(-S // args.pad_to_multiple_of) * args.pad_to_multiple_of
            ids = torch.full((len(rows), S), ESM_PAD, dtype=torch.long)
            am = torch.zeros((len(rows), S), dtype=torch.long)
            for r, t in enumerate(rows):
                ids[r, : len(t)] = torch.tensor(t)
                am[r, : len(t)] = 1
            inp, labels = esm_mlm(ids, gen)
            batches.append({
                "input_ids": inp, "attention_mask": am, "labels": labels,
                "lens": [len(t) for t in rows],
            })
            if len(batches) >= n_needed:
                break
        epoch += 1
    return batches, len(seqs)


def llama_batches(args, n_needed):
    seqs = read_fasta(args.data)
    stream = []
    for s in seqs:
        stream.append(DNA_BOS)
        stream.extend(b for b in s.encode("ascii", "replace"))
        stream.append(DNA_EOS)
    S, mb = args.seq_length, args.micro_batch
    stream_t = torch.tensor(stream, dtype=torch.long)
    n_windows = len(stream) // S
    if n_windows == 0:  # short file: repeat the stream until one window fits
        reps = -(-S // len(stream))
        stream_t = stream_t.repeat(reps)
        n_windows = len(stream_t) // S
    windows = stream_t[: n_windows * S].view(n_windows, S)
    batches = []
    k = 0
    while len(batches) < n_needed:
        idx = [(k + j) % n_windows for j in range(mb)]
        k += mb
        ids = windows[idx].clone()
        batches.append({"input_ids": ids, "labels": ids, "lens": [S] * mb})
    return batches, len(seqs), len(stream), n_windows


# ----------------------------------------------------------------------------- models

def build_esm(shape):
    from transformers import EsmConfig, EsmForMaskedLM
    L, H, A, F = ESM_SHAPES[shape]
    cfg = EsmConfig(
        vocab_size=ESM_V, pad_token_id=ESM_PAD, mask_token_id=ESM_MASK,
        hidden_size=H, num_hidden_layers=L, num_attention_heads=A, intermediate_size=F,
        hidden_act="gelu", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=1026, position_embedding_type="rotary", token_dropout=True,
        emb_layer_norm_before=False, layer_norm_eps=1e-5, initializer_range=0.02,
        tie_word_embeddings=True, is_folding_model=False,
    )
    model = EsmForMaskedLM._from_config(cfg, attn_implementation="sdpa")
    dims = dict(L=L, H=H, heads=A, ffn=F, V=ESM_V)
    return model, dims


def build_llama(shape):
    from transformers import LlamaConfig, LlamaForCausalLM
    L, H, A, KV, F, tied = LLAMA_SHAPES[shape]
    theta = 500000.0
    major = int(transformers.__version__.split(".")[0])
    rope = ({"rope_parameters": {"rope_type": "default", "rope_theta": theta}} if major >= 5
            else {"rope_theta": theta})
    cfg = LlamaConfig(
        vocab_size=DNA_V, hidden_size=H, intermediate_size=F, num_hidden_layers=L,
        num_attention_heads=A, num_key_value_heads=KV, head_dim=H // A, hidden_act="silu",
        max_position_embeddings=8192, rms_norm_eps=1e-5, tie_word_embeddings=tied,
        attention_bias=False, mlp_bias=False, attention_dropout=0.0,
        bos_token_id=DNA_BOS, eos_token_id=DNA_EOS, pad_token_id=1, initializer_range=0.02,
        use_cache=False, **rope,
    )
    model = LlamaForCausalLM._from_config(cfg, attn_implementation="sdpa")
    dims = dict(L=L, H=H, heads=A, kv_heads=KV, ffn=F, V=DNA_V)
    return model, dims


def static_graph_ok(args):
    return (not args.compile or args.compile_regional) and args.grad_acc == 1


def wrap_ddp(model, args, local_rank, on_cuda):
    """DistributedDataParallel as a careful user sets it up.

    ESM-2's contact head (2 parameters) takes no part in the masked-LM loss; it is frozen here so
    that every trainable parameter gets a gradient every step (DDP would otherwise wait for them
    forever, or need find_unused_parameters=True, which walks the graph every step). Frozen or
    not, its gradient is None and AdamW skips it, so training is unchanged.
    static_graph=True (DDP skips its per-step bookkeeping) is used where it is safe: not with
    a whole-model torch.compile (Dynamo's DDPOptimizer does not support it, pytorch#109261;
    regional compilation leaves DDP eager and keeps it) and not with
    gradient accumulation under no_sync (accelerate#3679)."""
    from torch.nn.parallel import DistributedDataParallel

    if args.model == "esm2":
        model.esm.contact_head.requires_grad_(False)
    ddp_model = DistributedDataParallel(
        model, device_ids=[local_rank] if on_cuda else None, gradient_as_bucket_view=True,
        static_graph=static_graph_ok(args))
    if args.ddp_bf16_compress:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        ddp_model.register_comm_hook(None, default_hooks.bf16_compress_hook)
    return ddp_model


def seed_flops(B, S, H, L, V):
    return (24 * B * S * H * H + 4 * B * S * S * H) * (3 * L) + 6 * B * S * H * V


# ----------------------------------------------------------------------------- main

def ddp_metrics(res, world, dev, n_params, peak):
    """Sums over the ranks of this rank's timed-region counts (a collective: every rank calls it).
    T (timed_time_s) is the same on every rank up to clock noise; the largest is used."""
    mine = [res["real_tokens"], res["padded_tokens"], res["model_flops_seed"],
            res["model_flops_seed_unpadded"], res["timed_time_s"]]
    t = torch.tensor(mine, dtype=torch.float64, device=dev)
    per_rank = [torch.zeros_like(t) for _ in range(world)]
    dist.all_gather(per_rank, t)
    per_rank = [x.tolist() for x in per_rank]
    real, padded, fl, fl_unpadded = (sum(r[k] for r in per_rank) for k in range(4))
    T = max(r[4] for r in per_rank)
    return dict(
        world_size=world,
        global_timed_time_s=T,
        global_real_tokens=int(real), global_padded_tokens=int(padded),
        global_real_tokens_per_sec=real / T, global_padded_tokens_per_sec=padded / T,
        tokens_per_sec_per_gpu=real / T / world,
        rank_real_tokens_per_sec=[r[0] / T for r in per_rank],
        rank_padded_tokens_per_sec=[r[1] / T for r in per_rank],
        global_padding_fraction=1.0 - real / padded,
        global_mfu_seed=fl / T / (peak * world),
        global_mfu_seed_unpadded=fl_unpadded / T / (peak * world),
        global_mfu_6n=6.0 * n_params * real / T / world / peak,
    )


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, choices=["esm2", "llama"])
    p.add_argument("--shape", required=True)
    p.add_argument("--data", required=True, help="FASTA, plain or .gz")
    p.add_argument("--tokens-per-batch", type=int, default=16384, help="esm2: B*S_padded budget")
    p.add_argument("--max-seq-length", type=int, default=1024, help="esm2: incl. <cls>/<eos>")
    p.add_argument("--pad-to-multiple-of", type=int, default=1, help="esm2: round padded S up")
    p.add_argument("--shuffle", action="store_true", help="esm2: shuffle sequences (fixed seed)")
    p.add_argument("--group-by-length", action="store_true",
                   help="esm2: HF Trainer group_by_length: fixed-seed shuffle, then sort by length "
                        "within mega-chunks of --mega-batch-mult x (tokens-per-batch // "
                        "max-seq-length) sequences before grouping (llama: no effect)")
    p.add_argument("--mega-batch-mult", type=int, default=50,
                   help="esm2 with --group-by-length: mega-chunk size in batches (HF: 50)")
    p.add_argument("--seq-length", type=int, default=8192, help="llama: window length")
    p.add_argument("--micro-batch", type=int, default=1, help="llama: windows per step")
    p.add_argument("--steps", type=int, default=None, help="timed steps (esm2 30, llama 20)")
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed steps (esm2 10, llama 5); with --compile they absorb compilation")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile(model) (default mode); under torchrun the DDP-wrapped model")
    p.add_argument("--compile-dynamic", action="store_true",
                   help="with --compile: torch.compile(dynamic=True), one graph for all batch "
                        "shapes from the first step (ESM-2: instead of a static compile, then "
                        "a recompile for each batch dimension that changes)")
    p.add_argument("--compile-regional", action="store_true",
                   help="with --compile: compile each transformer layer instead of the whole "
                        "model (PyTorch's regional compilation: one layer graph reused by all "
                        "layers, compiles in a fraction of the time; under DDP the gradient "
                        "all-reduces overlap the backward without Dynamo's DDPOptimizer)")
    p.add_argument("--ddp-bf16-compress", action="store_true",
                   help="under torchrun: DDP bf16_compress_hook (gradients all-reduced as bf16)")
    p.add_argument("--recompute", action="store_true", help="gradient checkpointing")
    p.add_argument("--grad-acc", type=int, default=1, help="micro batches per optimizer step")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-autocast", action="store_true", help="fp32 compute, no bf16 autocast")
    p.add_argument("--cpu-autocast", action="store_true",
                   help="with --device cpu: use bf16 autocast too (default off on CPU: very slow)")
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    shapes = ESM_SHAPES if a.model == "esm2" else LLAMA_SHAPES
    if a.shape not in shapes:
        p.error(f"--shape for {a.model} must be one of {', '.join(shapes)}")
    if a.steps is None:
        a.steps = 30 if a.model == "esm2" else 20
    if a.warmup is None:
        a.warmup = 10 if a.model == "esm2" else 5
    if a.steps < 1 or a.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if a.model == "esm2" and a.tokens_per_batch < a.max_seq_length:
        p.error("--tokens-per-batch must be >= --max-seq-length")
    if a.model == "esm2" and a.max_seq_length < 3:
        p.error("--max-seq-length must be >= 3")
    if (a.compile_dynamic or a.compile_regional) and not a.compile:
        p.error("--compile-dynamic and --compile-regional need --compile")
    if a.mega_batch_mult < 1:
        p.error("--mega-batch-mult must be >= 1")
    return a


def versions(device):
    v = {
        "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "host": platform.node(),
    }
    if device.type == "cuda":
        v["gpu"] = torch.cuda.get_device_name(device)
        v["gpu_count"] = torch.cuda.device_count()
        v["gpu_mem_gib"] = round(torch.cuda.get_device_properties(device).total_memory / GIB, 1)
    else:
        v["gpu"] = None
    return v


def is_oom(e):
    if isinstance(e, torch.cuda.OutOfMemoryError):
        return True
    s = str(e)
    return "out of memory" in s.lower() or "OutOfMemoryError" in s


def dist_setup(dev):
    """Under torchrun (WORLD_SIZE > 1): one process per GPU, NCCL (Gloo with --device cpu).
    Returns (rank, local_rank, world, device); (0, 0, 1, dev) for a plain single process."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 0, 1, dev
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    if dev.type == "cuda":
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dist.init_process_group("gloo")
    return rank, local_rank, world, dev


def main():
    args = parse_args()
    dev = torch.device(args.device)
    on_cuda = dev.type == "cuda"
    if on_cuda and not torch.cuda.is_available():
        raise SystemExit("CUDA not available (use --device cpu for a smoke test)")
    rank, local_rank, world, dev = dist_setup(dev)
    ddp = world > 1

    def say(*a, **kw):  # only rank 0 prints
        if rank == 0:
            print(*a, **kw)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    use_ac = not args.no_autocast and (on_cuda or args.cpu_autocast)

    mode = ("compiled" if args.compile else "eager") + ("+recompute" if args.recompute else "")
    if args.compile_regional:
        mode = mode.replace("compiled", "compiled-regional")
    if args.compile_dynamic:
        mode = mode.replace("compiled", "compiled-dynamic")
    if ddp:
        mode += f"+ddp{world}" + ("+bf16comm" if args.ddp_bf16_compress else "")
    name = f"{args.model}-{args.shape}"
    if args.model == "esm2":
        oom_where = f"tokens-per-batch {args.tokens_per_batch}"
        lr, betas, wd = (args.lr or 4e-4), (0.9, 0.98), 0.01
    else:
        oom_where = f"micro-batch {args.micro_batch} x seq-length {args.seq_length}"
        lr, betas, wd = (args.lr or 3e-3), (0.9, 0.95), 0.1
    if args.compile and not args.compile_dynamic and args.model == "esm2" and args.warmup < 5:
        say(f"WARNING: --compile with --warmup {args.warmup}: ESM-2 batches change shape, "
            "torch.compile recompiles (static, then dynamic shapes) during the first few "
            "distinct shapes; use --warmup >= 5 (default 10) so compilation is not timed.",
            flush=True)

    result = {
        "framework": "hf", "model": args.model, "shape": args.shape, "mode": mode,
        "compile": args.compile, "recompute": args.recompute, "device": str(dev),
        "autocast": "bf16" if use_ac else None, "attn_implementation": "sdpa",
        "optimizer": {"name": "AdamW", "fused": True, "lr": lr, "betas": list(betas),
                      "eps": 1e-8, "weight_decay": wd, "clip_grad_norm": args.clip},
        "steps": args.steps, "warmup": args.warmup, "grad_acc": args.grad_acc, "data": args.data, "seed": args.seed,
        "peak_tflops": args.peak_tflops, "versions": versions(dev), "argv": sys.argv[1:],
    }
    if args.model == "esm2":
        result.update(tokens_per_batch=args.tokens_per_batch, max_seq_length=args.max_seq_length,
                      pad_to_multiple_of=args.pad_to_multiple_of, shuffle=args.shuffle)
        if args.group_by_length:  # (key absent otherwise: single runs keep their old JSON)
            result.update(group_by_length=True, mega_batch_mult=args.mega_batch_mult)
    else:
        result.update(seq_length=args.seq_length, micro_batch=args.micro_batch)
    if args.compile_dynamic:  # (keys absent otherwise, as group_by_length below)
        result["compile_dynamic"] = True
    if args.compile_regional:
        result["compile_regional"] = True
    if ddp:
        result.update(world_size=world, ddp={
            "backend": dist.get_backend(), "static_graph": static_graph_ok(args),
            "gradient_as_bucket_view": True, "bf16_compress_hook": args.ddp_bf16_compress,
            "compiled": (None if not args.compile else "each transformer layer"
                         if args.compile_regional else "DDP-wrapped model"),
            "env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        })

    def finish(res):
        if args.json and rank == 0:
            d = os.path.dirname(os.path.abspath(args.json))
            os.makedirs(d, exist_ok=True)
            with open(args.json, "w") as f:
                json.dump(res, f, indent=2)
                f.write("\n")
            say(f"wrote {args.json}")

    # ---- data (built before the model; CPU work, not timed). Under torchrun every rank builds
    # the same global list of world x n_needed batches and takes batches rank, rank + world, ...
    # (its own n_needed: the same per-rank budget as a single-GPU run).
    n_needed = (args.warmup + args.steps) * args.grad_acc
    t = time.perf_counter()
    if args.model == "esm2":
        batches, n_seqs = esm_batches(args, n_needed * world)
        result["data_sequences"] = n_seqs
    else:
        batches, n_seqs, n_stream, n_win = llama_batches(args, n_needed * world)
        result.update(data_sequences=n_seqs, data_stream_tokens=n_stream, data_windows=n_win)
    if ddp:
        batches = batches[rank::world]
    if on_cuda:
        for b in batches:
            for k in ("input_ids", "attention_mask", "labels"):
                if k in b:
                    b[k] = b[k].pin_memory()
    say(f"data: {n_seqs} sequences -> {len(batches)} batches"
        f"{f' per rank ({world} ranks)' if ddp else ''} prepared in "
        f"{time.perf_counter() - t:.1f} s", flush=True)

    if on_cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    ac_dtype = torch.bfloat16

    try:
        # ---- model, built directly on the device (fp32 params)
        t = time.perf_counter()
        with torch.device(dev):
            model, dims = (build_esm if args.model == "esm2" else build_llama)(args.shape)
        model = model.to(device=dev, dtype=torch.float32)
        model.train()
        if args.recompute:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        n_params = sum(p.numel() for p in model.parameters())  # unique (tied counted once)
        n_embed = model.get_input_embeddings().weight.numel()
        assert model.config._attn_implementation == "sdpa", model.config._attn_implementation
        result.update(dims=dims, n_params=n_params, n_params_embedding=n_embed)
        say(f"model: HF {type(model).__name__} {args.shape} {dims} params {n_params/1e6:.1f}M "
            f"(built in {time.perf_counter() - t:.1f} s) attn=sdpa autocast="
            f"{'bf16' if use_ac else 'off'} recompute={args.recompute}", flush=True)

        opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=betas, eps=1e-8,
                                weight_decay=wd, fused=True)
        ddp_model = wrap_ddp(model, args, local_rank, on_cuda) if ddp else None
        # torch.compile with DDP: compile the DDP-wrapped module, as the PyTorch docs (torch.compile
        # "Distributed" notes, DDPOptimizer) and Accelerate do: Dynamo's DDPOptimizer then splits
        # the graph at DDP's bucket boundaries so that gradient all-reduces overlap the backward.
        # --compile-regional compiles the transformer layers inside instead (DDP stays eager).
        trained = ddp_model if ddp else model
        dynamic = True if args.compile_dynamic else None
        fwd = trained
        if args.compile and args.compile_regional:
            layers = model.esm.encoder.layer if args.model == "esm2" else model.model.layers
            for layer in layers:
                layer.compile(dynamic=dynamic)
        elif args.compile:
            fwd = torch.compile(trained, dynamic=dynamic)

        def micro_step(b, n_micro):  # forward + backward of one micro batch
            ids = b["input_ids"].to(dev, non_blocking=True)
            labels = b["labels"].to(dev, non_blocking=True)
            kw = {}
            if "attention_mask" in b:
                kw["attention_mask"] = b["attention_mask"].to(dev, non_blocking=True)
            with torch.autocast(dev.type, dtype=ac_dtype, enabled=use_ac):
                out = fwd(input_ids=ids, labels=labels, **kw)
            loss = out.loss
            (loss / n_micro).backward()
            return loss

        def step(group):  # one optimizer step over args.grad_acc micro batches
            for j, b in enumerate(group):
                # DDP: all-reduce only on the last micro batch of the step
                accumulate = ddp and j < len(group) - 1
                with (ddp_model.no_sync() if accumulate else contextlib.nullcontext()):
                    loss = micro_step(b, len(group))
            gn = torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach(), gn.detach()

        def sync():
            if on_cuda:
                torch.cuda.synchronize(dev)

        graphs0 = None
        if args.compile:
            import torch._dynamo.utils as dyn_utils

            def n_graphs():
                return int(dyn_utils.counters["stats"].get("unique_graphs", 0))

        groups = [batches[i * args.grad_acc:(i + 1) * args.grad_acc] for i in range(args.warmup + args.steps)]
        # ---- warmup (untimed; includes compilation with --compile)
        sync()
        t_w = time.perf_counter()
        warm_times = []
        for i in range(args.warmup):
            t0 = time.perf_counter()
            loss, _ = step(groups[i])
            sync()
            warm_times.append(time.perf_counter() - t0)
            say(f"  warmup {i + 1}/{args.warmup}: B={len(groups[i][0]['lens'])} "
                f"S={groups[i][0]['input_ids'].shape[1]} x{args.grad_acc} {warm_times[-1]:.3f} s "
                f"loss {loss.item():.4f}", flush=True)
        result["warmup_time_s"] = time.perf_counter() - t_w
        result["warmup_step_times_s"] = warm_times
        if args.compile:
            graphs0 = n_graphs()

        # ---- timed region
        timed_groups = groups[args.warmup: args.warmup + args.steps]
        timed = [b for g in timed_groups for b in g]  # micro batches, for the token counts
        losses, gnorms, cpu_step = [], [], []
        compiled = []  # per timed step: did torch.compile make a new graph during it?
        graphs_prev = graphs0
        if on_cuda:
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in timed_groups]
        sync()
        if ddp:  # every rank starts the clock together ...
            dist.barrier()
            sync()
        t0 = time.perf_counter()
        for i, g in enumerate(timed_groups):
            ts = time.perf_counter()
            if on_cuda:
                ev[i][0].record()
            loss, gn = step(g)
            if on_cuda:
                ev[i][1].record()
            if args.compile:  # (a host-side counter: no synchronisation)
                graphs_now = n_graphs()
                compiled.append(graphs_now != graphs_prev)
                graphs_prev = graphs_now
            losses.append(loss)
            gnorms.append(gn)
            cpu_step.append(time.perf_counter() - ts)
        sync()
        if ddp:  # ... and stops it when the last rank is done: T is the same on every rank
            dist.barrier()
            sync()
        total = time.perf_counter() - t0
        if on_cuda:
            step_times = [s.elapsed_time(e) / 1e3 for s, e in ev]
        else:
            step_times = cpu_step
        if args.compile:
            result["compile_graphs_after_warmup"] = graphs0
            result["recompiles_during_timed"] = n_graphs() - graphs0
            if result["recompiles_during_timed"]:
                say(f"WARNING: torch.compile produced {result['recompiles_during_timed']} new "
                    "graph(s) during the timed steps; raise --warmup", flush=True)
        losses = [x.item() for x in losses]
        gnorms = [x.item() for x in gnorms]
    except Exception as e:  # noqa: BLE001
        if not is_oom(e):
            raise
        msg = f"OOM at {oom_where}"
        result.update(status="oom", error=msg, exception=f"{type(e).__name__}: {str(e)[:2000]}")
        if on_cuda:
            result["peak_mem_gib"] = torch.cuda.max_memory_allocated(dev) / GIB
        print(f"HF {name} {mode}: {msg}" + (f" (rank {rank})" if ddp else ""), flush=True)
        finish(result)
        if ddp:  # the other ranks would wait forever in a collective: exit non-zero so that
            return 3  # torchrun stops them
        return 0

    # ---- metrics
    H, L, V = dims["H"], dims["L"], dims["V"]
    peak = args.peak_tflops * 1e12
    real = sum(sum(b["lens"]) for b in timed)
    padded = sum(b["input_ids"].numel() for b in timed)
    fl_seed = sum(seed_flops(b["input_ids"].shape[0], b["input_ids"].shape[1], H, L, V) for b in timed)
    fl_seed_unpadded = sum(seed_flops(1, n, H, L, V) for b in timed for n in b["lens"])
    real_tps, padded_tps = real / total, padded / total
    med = statistics.median(step_times)
    result.update(
        status="ok",
        timed_time_s=total,
        real_tokens=real, padded_tokens=padded,
        real_tokens_per_sec=real_tps, padded_tokens_per_sec=padded_tps,
        padding_fraction=1.0 - real / padded,
        step_time_s=med, step_time_median_s=med, step_time_mean_s=total / len(timed_groups),
        step_time_min_s=min(step_times), step_time_max_s=max(step_times),
        step_times_s=step_times,
        batch_rows=[b["input_ids"].shape[0] for b in timed],
        batch_padded_len=[b["input_ids"].shape[1] for b in timed],
        batch_real_tokens=[sum(b["lens"]) for b in timed],
        model_flops_seed=fl_seed, model_flops_seed_unpadded=fl_seed_unpadded,
        mfu_seed=fl_seed / total / peak,
        mfu_seed_unpadded=fl_seed_unpadded / total / peak,
        mfu_6n=6.0 * n_params * real_tps / peak,
        mfu_6n_padded=6.0 * n_params * padded_tps / peak,
        losses=losses, grad_norms=gnorms,
        final_loss=losses[-1],
    )
    if any(compiled):
        # The same figure over the timed steps that did not compile: what the compiled model does
        # once compiled. Both are reported; real_tokens_per_sec stays the figure over every step.
        keep = [i for i, c in enumerate(compiled) if not c]
        step_real = [sum(sum(b["lens"]) for b in g) for g in timed_groups]
        t_keep = sum(step_times[i] for i in keep)
        result["timed_steps_that_compiled"] = [i for i, c in enumerate(compiled) if c]
        result["real_tokens_per_sec_excluding_compiling_steps"] = (
            sum(step_real[i] for i in keep) / t_keep if keep and t_keep > 0 else None)
    if on_cuda:
        result["peak_mem_gib"] = torch.cuda.max_memory_allocated(dev) / GIB
        result["peak_mem_reserved_gib"] = torch.cuda.max_memory_reserved(dev) / GIB
    else:
        import resource
        result["peak_mem_gib"] = None
        result["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
    if ddp:
        result.update(ddp_metrics(result, world, dev, n_params, peak))
    if not all(math.isfinite(x) for x in losses):
        say("WARNING: non-finite loss in the timed steps", flush=True)

    say("  timed steps: " + " ".join(f"{t:.3f}" for t in step_times) + " s")
    if result.get("timed_steps_that_compiled"):
        x = result["real_tokens_per_sec_excluding_compiling_steps"]
        say(f"  timed steps that compiled a new graph: {result['timed_steps_that_compiled']}; "
            f"without them: {'n/a' if x is None else f'{x:,.0f}'} real tok/s")
    say(f"  losses: first {losses[0]:.4f} last {losses[-1]:.4f}; grad norm last {gnorms[-1]:.3f}")
    mem = (f"peak {result['peak_mem_gib']:.1f} GiB" if on_cuda
           else f"peak RSS {result['peak_rss_gib']:.1f} GiB (cpu)")
    pad = f" | {100 * result['padding_fraction']:.1f}% padding" if args.model == "esm2" else ""
    say(f"HF {name} {mode}: {real_tps:,.0f} real tok/s | {padded_tps:,.0f} padded tok/s{pad} | "
        f"step {med:.3f} s | MFU {100 * result['mfu_seed']:.1f}% (seed) / "
        f"{100 * result['mfu_6n']:.1f}% (6N) | {mem}", flush=True)
    if ddp:
        per_rank = " + ".join(f"{x:,.0f}" for x in result["rank_real_tokens_per_sec"])
        say(f"HF {name} {mode}: {world} ranks: {per_rank} = "
            f"{result['global_real_tokens_per_sec']:,.0f} real tok/s | "
            f"{result['tokens_per_sec_per_gpu']:,.0f} per GPU | "
            f"{100 * result['global_padding_fraction']:.1f}% padding | "
            f"MFU {100 * result['global_mfu_seed']:.1f}% (seed) / "
            f"{100 * result['global_mfu_6n']:.1f}% (6N) per GPU", flush=True)
    finish(result)
    if ddp:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
