#!/usr/bin/env python3
"""Generate tiny random Hugging Face models plus reference outputs for C++ parity tests.

Usage:
    python3 tools/make_hf_fixtures.py --out tests/fixtures [--only esm2|llama] [--case NAME]

Needs torch, transformers (written against 5.x, also runs on 4.5x) and safetensors.
Runs on the CPU in fp32 on purpose (exact reference, no TF32, no fused kernels), fully
deterministic, no network access (nothing is downloaded; tokenizers are built locally).

For every case it writes tests/fixtures/<case>/:
  config.json            config.to_json_file() of the exact config used
  model.safetensors      every parameter, HF names, dtype BF16 (the random weights are rounded to
                         bf16-representable values before any compute, so BF16 storage is exact).
                         Excluded: tied `lm_head.decoder.weight` (ESM) / tied `lm_head.weight`
                         (llama_tied) and all buffers (rotary `inv_freq`, `position_ids`).
                         ESM files DO contain `esm.contact_head.regression.{weight,bias}` (as the
                         published checkpoints do): an importer must ignore them.
  config.legacy.json     (Llama cases only) the same config in the transformers-4 shape:
                         top-level rope_theta / rope_scaling, no head_dim.
  reference.safetensors  see REFERENCE TENSORS below
  vocab.txt, tokenizer_config.json, special_tokens_map.json   (ESM cases only: EsmTokenizer)

REFERENCE TENSORS (F32 unless noted)
  input_ids        I32 [B,S]  right-padded with <pad>=1
  attention_mask   I32 [B,S]  1 on real tokens (specials included), 0 on padding
  labels           I32 [B,S]  -100 = ignored. ESM: MLM labels. Llama: input_ids with -100 on
                              padding, *unshifted* (HF shifts inside the loss)
  logits           [B,S,V]
  loss             [1]        mean cross-entropy over non-ignored (shifted, for Llama) labels
  last_hidden_state [B,S,H]   final hidden state AFTER the final norm
                              (ESM: esm.encoder.emb_layer_norm_after, Llama: model.norm)
                              == base_model(...).last_hidden_state
  hidden_states.{i} [B,S,H]   i = 0..len(out.hidden_states)-1, exactly as HF returns them;
                              hidden_states.0 is the embedding output (ESM: after token dropout
                              and pad zeroing). See the summary printed for which index equals
                              last_hidden_state (the script asserts it).
  seq_lens         I32 [B]    number of real tokens per row
  grad.<name>      [param shape]  d loss / d param for every parameter in model.named_parameters()
                              (the tied embedding appears once; its grad includes both uses),
                              except esm.contact_head.* (unused by the loss, no grad).
                              Matrices of more than 100,000 elements keep rows 0, 4, 8, ... only
                              ([rows/4, cols]; metadata grad_row_stride = 4) so fixtures stay
                              small; the tests compare those rows (tests/hf_fixture.h).

Every ESM model runs with attn_implementation="eager" and all dropout probabilities 0.0, so
train and eval mode give identical numbers; the fixture is computed in train mode anyway (the
mode the C++ trainer uses). NOTE: ESM token dropout (`token_dropout=True`) is applied in HF's
EsmEmbeddings regardless of train/eval mode.
"""

import argparse
import json
import math
import os
import random
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never touch the network
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

import transformers  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

GRAD_FULL_LIMIT = 100_000  # larger gradient matrices keep every GRAD_ROW_STRIDE-th row
GRAD_ROW_STRIDE = 4

PAD, CLS, EOS, MASK = 1, 0, 2, 32

ESM_VOCAB = [
    "<cls>", "<pad>", "<eos>", "<unk>",
    "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K", "Q", "N", "F", "Y", "M", "H",
    "W", "C", "X", "B", "U", "Z", "O", ".", "-", "<null_1>", "<mask>",
]


# ----------------------------------------------------------------------------- helpers

def init_params(model, seed):
    """Re-initialise every parameter deterministically with a larger-than-default spread, then
    round to bf16-representable fp32 values. Parameters are visited in sorted-name order with a
    private generator so the result does not depend on transformers' own init code."""
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            leaf = name.rsplit(".", 1)[-1]
            is_norm = ("LayerNorm" in name or "layer_norm" in name or "layernorm" in name
                       or name.endswith("norm.weight") or name.endswith("norm.bias"))
            if is_norm and leaf == "weight":
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
            elif is_norm and leaf == "bias":
                v = 0.1 * torch.randn(p.shape, generator=g)
            elif leaf == "bias":
                v = 0.05 * torch.randn(p.shape, generator=g)
            elif "embed" in name:
                # 2/sqrt(H): tied ESM / Llama logits then have std ~2 (loss of a few nats,
                # softmax not saturated, so every logit and gradient matters)
                v = (2.0 / math.sqrt(p.shape[-1])) * torch.randn(p.shape, generator=g)
            else:  # linear weights [out, in]
                v = 0.1 * torch.randn(p.shape, generator=g)
            p.copy_(v.to(torch.bfloat16).float())
    # padding_idx rows are not special for the C++ side: keep whatever the init produced
    # (HF does not force them to zero after init; the forward zeroes pads via attention_mask
    # for ESM and the padded positions never matter for the loss).


def write_weights(model, path, exclude):
    tensors = {}
    for name, p in model.named_parameters():
        if name in exclude:
            continue
        t = p.detach().to(torch.bfloat16).contiguous()
        assert torch.equal(t.float(), p.detach()), f"{name} not bf16-representable"
        tensors[name] = t
    save_file(tensors, path, metadata={"format": "pt"})
    return tensors


def load_back_and_compare(cls, out_dir, batch, ref_logits, what):
    """Self-check: transformers' from_pretrained must load the BF16 safetensors written here
    (without the tied decoder weight and without inv_freq) and reproduce the logits exactly."""
    kw = dict(attn_implementation="eager")
    try:
        m2 = cls.from_pretrained(out_dir, dtype=torch.float32, **kw)
    except TypeError:  # transformers < 4.56 spells it torch_dtype
        m2 = cls.from_pretrained(out_dir, torch_dtype=torch.float32, **kw)
    m2.train()
    for p in m2.parameters():
        assert p.dtype == torch.float32
    with torch.no_grad():
        o2 = m2(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    diff = (o2.logits - ref_logits).abs().max().item()
    print(f"  self-check from_pretrained({what}): max|logits diff| = {diff:.3g}")
    assert diff == 0.0, f"reloaded model differs from the generated one: {diff}"


def save_reference(out_dir, model, batch, out, extra=None):
    ref = {
        "input_ids": batch["input_ids"].to(torch.int32).contiguous(),
        "attention_mask": batch["attention_mask"].to(torch.int32).contiguous(),
        "labels": batch["labels"].to(torch.int32).contiguous(),
        "seq_lens": batch["attention_mask"].sum(-1).to(torch.int32).contiguous(),
        "logits": out.logits.detach().float().contiguous(),
        "loss": out.loss.detach().float().reshape(1).contiguous(),
    }
    for i, h in enumerate(out.hidden_states):
        ref[f"hidden_states.{i}"] = h.detach().float().contiguous()
    no_grad = []
    for name, p in model.named_parameters():
        if p.grad is None:  # e.g. ESM's esm.contact_head.* (not used by the MLM loss)
            no_grad.append(name)
            continue
        g = p.grad.detach().float()
        if g.dim() == 2 and g.numel() > GRAD_FULL_LIMIT and g.shape[0] % GRAD_ROW_STRIDE == 0:
            g = g[::GRAD_ROW_STRIDE]  # every GRAD_ROW_STRIDE-th row of a large matrix
        ref[f"grad.{name}"] = g.contiguous()
    for name in no_grad:
        assert name.startswith("esm.contact_head."), f"no grad for {name}"
    if extra:
        ref.update(extra)
    save_file(ref, os.path.join(out_dir, "reference.safetensors"),
              metadata={"format": "pt", "grad_row_stride": str(GRAD_ROW_STRIDE)})
    return ref


def summarize(out_dir, ref, notes):
    print(f"  files in {out_dir}:")
    for fn in sorted(os.listdir(out_dir)):
        print(f"    {fn:28s} {os.path.getsize(os.path.join(out_dir, fn)):>10d} bytes")
    for k in ("input_ids", "logits", "last_hidden_state"):
        print(f"  {k:18s} {list(ref[k].shape)} {ref[k].dtype}")
    lg = ref["logits"]
    print(f"  logits std {lg.std().item():.3f}  max|.| {lg.abs().max().item():.3f}")
    print(f"  hidden_states      {sum(1 for k in ref if k.startswith('hidden_states.'))} tensors")
    print(f"  grads              {sum(1 for k in ref if k.startswith('grad.'))} tensors")
    print(f"  loss               {ref['loss'].item():.6f}")
    for n in notes:
        print(f"  note: {n}")


# ----------------------------------------------------------------------------- ESM-2

def esm_batch(seed, lens):
    """3 protein sequences (residue counts `lens`), <cls> SEQ <eos>, right-padded with <pad>.
    MLM corruption: ~15% of residues -> <mask> (at least one per sequence), plus one residue
    replaced by a random amino acid and one residue kept unchanged, both still labelled."""
    rng = random.Random(seed)
    S = max(lens) + 2
    ids = torch.full((len(lens), S), PAD, dtype=torch.long)
    am = torch.zeros((len(lens), S), dtype=torch.long)
    labels = torch.full((len(lens), S), -100, dtype=torch.long)
    rare = [24, 25, 26]  # X, B, U
    for b, L in enumerate(lens):
        res = [rng.randint(4, 23) for _ in range(L)]
        # sprinkle a few X/B/U
        for j, tok in enumerate(rare):
            if L > 4 * (j + 1):
                res[rng.randrange(L)] = tok
        seq = [CLS] + res + [EOS]
        ids[b, : L + 2] = torch.tensor(seq)
        am[b, : L + 2] = 1
        pos = list(range(1, L + 1))
        rng.shuffle(pos)
        n_mask = max(1, round(0.15 * L))
        for p in pos[:n_mask]:
            labels[b, p] = ids[b, p]
            ids[b, p] = MASK
        if L >= 4:
            p_rand, p_keep = pos[n_mask], pos[n_mask + 1]
            labels[b, p_rand] = ids[b, p_rand]
            new = rng.randint(4, 23)
            while new == ids[b, p_rand].item():
                new = rng.randint(4, 23)
            ids[b, p_rand] = new          # 10% case: random replacement, labelled
            labels[b, p_keep] = ids[b, p_keep]  # 10% case: kept unchanged, labelled
    return {"input_ids": ids, "attention_mask": am, "labels": labels}


def write_esm_tokenizer(out_dir):
    with open(os.path.join(out_dir, "vocab.txt"), "w") as f:
        f.write("\n".join(ESM_VOCAB) + "\n")
    try:
        from transformers import EsmTokenizer
        tok = EsmTokenizer(vocab_file=os.path.join(out_dir, "vocab.txt"))
        tok.save_pretrained(out_dir)
        stm = os.path.join(out_dir, "special_tokens_map.json")
        if not os.path.exists(stm):  # transformers >= 5 folds it into tokenizer_config.json;
            # published facebook/esm2_* checkpoints still ship it, so write it the same way
            with open(stm, "w") as f:
                json.dump({"cls_token": "<cls>", "eos_token": "<eos>", "mask_token": "<mask>",
                           "pad_token": "<pad>", "unk_token": "<unk>"}, f, indent=2)
                f.write("\n")
        enc = tok("MKTAYIAKQRXBU")["input_ids"]
        want = [0] + [ESM_VOCAB.index(c) for c in "MKTAYIAKQRXBU"] + [2]
        assert enc == want, (enc, want)
        assert tok.pad_token_id == PAD and tok.mask_token_id == MASK
    except Exception as e:  # tokenizer files are a convenience, not the fixture's point
        print(f"  warning: EsmTokenizer save failed: {e!r}")


def make_esm(out_root, name, layers, hidden, heads, inter, seed):
    from transformers import EsmConfig, EsmForMaskedLM

    print(f"== {name}")
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    cfg = EsmConfig(
        vocab_size=33, pad_token_id=PAD, mask_token_id=MASK,
        hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        intermediate_size=inter, hidden_act="gelu",
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=1026, position_embedding_type="rotary",
        token_dropout=True, emb_layer_norm_before=False, layer_norm_eps=1e-5,
        initializer_range=0.02, tie_word_embeddings=True, is_folding_model=False,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = EsmForMaskedLM(cfg).float()
    model.config._attn_implementation = "eager"
    assert model.config._attn_implementation == "eager"
    init_params(model, seed)
    # the decoder must be tied to the word embeddings
    assert model.lm_head.decoder.weight.data_ptr() == model.esm.embeddings.word_embeddings.weight.data_ptr()
    model.train()

    batch = esm_batch(seed + 1, [29, 17, 6])
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                labels=batch["labels"], output_hidden_states=True)
    out.loss.backward()

    # which hidden_states index is the post-final-LN state?
    with torch.no_grad():
        base = model.esm(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    last = base.last_hidden_state
    idx = [i for i, h in enumerate(out.hidden_states) if torch.equal(h, last)]
    assert idx, "no hidden_states entry equals last_hidden_state"
    notes = [f"len(hidden_states) = {len(out.hidden_states)} for {layers} layers; "
             f"index(es) {idx} equal last_hidden_state (post emb_layer_norm_after)"]
    # logits must be the LM head applied to last_hidden_state
    with torch.no_grad():
        assert torch.equal(model.lm_head(last), out.logits)

    # independent check of token dropout semantics documented in FACTS.md
    with torch.no_grad():
        ids, am = batch["input_ids"], batch["attention_mask"]
        e = model.esm.embeddings.word_embeddings(ids)
        e = e.masked_fill((ids == MASK).unsqueeze(-1), 0.0)
        ratio_obs = (ids == MASK).sum(-1).float() / am.sum(-1)
        e = e * (1 - 0.15 * 0.8) / (1 - ratio_obs)[:, None, None]
        e = e * am.unsqueeze(-1)
        d = (e - out.hidden_states[0]).abs().max().item()
        notes.append(f"hidden_states.0 vs hand-computed token dropout: max diff {d:.3g}")
        assert d < 1e-5, d

    exclude = {"lm_head.decoder.weight"}
    write_weights(model, os.path.join(out_dir, "model.safetensors"), exclude)
    cfg.to_json_file(os.path.join(out_dir, "config.json"))
    write_esm_tokenizer(out_dir)
    ref = save_reference(out_dir, model, batch, out,
                         extra={"last_hidden_state": last.detach().float().contiguous()})
    load_back_and_compare(EsmForMaskedLM, out_dir, batch, out.logits.detach(), name)
    n_mask = (batch["input_ids"] == MASK).sum(-1).tolist()
    n_lab = (batch["labels"] != -100).sum(-1).tolist()
    notes.append(f"masks per row {n_mask}, labelled per row {n_lab}, seq_lens {ref['seq_lens'].tolist()}")
    summarize(out_dir, ref, notes)


# ----------------------------------------------------------------------------- Llama

def dna_batch(seed, lens):
    """DNA byte ids: <BOS>=2 SEQ <EOS>=0, right-padded with <PAD>=1; some N (78) inside.
    labels = input_ids with -100 on padding (HF shifts internally)."""
    rng = random.Random(seed)
    S = max(lens) + 2
    ids = torch.full((len(lens), S), 1, dtype=torch.long)
    am = torch.zeros((len(lens), S), dtype=torch.long)
    for b, L in enumerate(lens):
        res = [rng.choice([65, 67, 71, 84]) for _ in range(L)]
        for _ in range(max(1, L // 10)):
            res[rng.randrange(L)] = 78
        seq = [2] + res + [0]
        ids[b, : L + 2] = torch.tensor(seq)
        am[b, : L + 2] = 1
    labels = ids.masked_fill(am == 0, -100)
    return {"input_ids": ids, "attention_mask": am, "labels": labels}


def llama_rope_kwargs(tied):
    """rope settings in the config shape the installed transformers understands."""
    theta = 500000.0
    scaling = None if tied else {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        rp = {"rope_type": "default", "rope_theta": theta} if scaling is None else dict(scaling, rope_theta=theta)
        return {"rope_parameters": rp}
    kw = {"rope_theta": theta}
    if scaling is not None:
        kw["rope_scaling"] = scaling
    return kw


def write_legacy_llama_config(out_dir, cfg, tied):
    """config.legacy.json: the same model in the transformers-4 config shape (top-level rope_theta
    and rope_scaling, as e.g. Llama-3.2-1B ships), so a config reader can be tested on both."""
    d = json.load(open(os.path.join(out_dir, "config.json")))
    rp = d.pop("rope_parameters", None)
    if rp is not None:
        d["rope_theta"] = rp["rope_theta"]
        sc = {k: v for k, v in rp.items() if k != "rope_theta"}
        d["rope_scaling"] = None if sc.get("rope_type", "default") == "default" else sc
    d.pop("head_dim", None) if d.get("head_dim") == d["hidden_size"] // d["num_attention_heads"] else None
    path = os.path.join(out_dir, "config.legacy.json")
    with open(path, "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)
        f.write("\n")
    # transformers must read it back as the same rope setup
    from transformers import LlamaConfig
    c2 = LlamaConfig.from_json_file(path)
    a = getattr(c2, "rope_parameters", None) or dict(getattr(c2, "rope_scaling", None) or {}, rope_theta=c2.rope_theta)
    b = getattr(cfg, "rope_parameters", None) or dict(getattr(cfg, "rope_scaling", None) or {}, rope_theta=cfg.rope_theta)
    a = {k: v for k, v in dict(a).items() if k != "type"}
    b = {k: v for k, v in dict(b).items() if k != "type"}
    assert a == b, (a, b)


def rope_branches(head_dim, theta, factor, lo, hi, orig):
    """Classify each rotary frequency by the llama3 remap branch it falls in."""
    out = []
    for i in range(0, head_dim, 2):
        inv = theta ** (-i / head_dim)
        wl = 2 * math.pi / inv
        if wl < orig / hi:
            out.append("high(kept)")
        elif wl > orig / lo:
            out.append("low(/factor)")
        else:
            out.append("medium(smoothed)")
    return out


def make_llama(out_root, name, tied, seed):
    from transformers import LlamaConfig, LlamaForCausalLM

    print(f"== {name}")
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    cfg = LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, hidden_act="silu",
        max_position_embeddings=256, rms_norm_eps=1e-5, tie_word_embeddings=tied,
        attention_bias=False, mlp_bias=False, attention_dropout=0.0,
        bos_token_id=2, eos_token_id=0, pad_token_id=1, initializer_range=0.02,
        **llama_rope_kwargs(tied),
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).float()
    model.config._attn_implementation = "eager"
    assert model.config._attn_implementation == "eager"
    init_params(model, seed)
    if tied:
        assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    else:
        assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()
    model.train()

    notes = []
    if not tied:
        br = rope_branches(16, 500000.0, 8.0, 1.0, 4.0, 64)
        notes.append(f"llama3 rope remap branches per frequency: {br}")
        assert len(set(br)) == 3, br
        # the remapped inv_freq HF actually uses differs from the plain one
        rot = model.model.rotary_emb
        plain = 1.0 / (500000.0 ** (torch.arange(0, 16, 2, dtype=torch.float32) / 16))
        assert not torch.allclose(rot.inv_freq.float(), plain), "llama3 remap not applied"
        notes.append(f"HF inv_freq (remapped) = {[float(f'{x:.6g}') for x in rot.inv_freq.tolist()]}")

    batch = dna_batch(seed + 1, [37, 21, 9])
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                labels=batch["labels"], output_hidden_states=True)
    out.loss.backward()

    with torch.no_grad():
        base = model.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
    last = base.last_hidden_state
    idx = [i for i, h in enumerate(out.hidden_states) if torch.equal(h, last)]
    assert idx, "no hidden_states entry equals last_hidden_state"
    notes.append(f"len(hidden_states) = {len(out.hidden_states)} for 2 layers; index(es) {idx} "
                 f"equal last_hidden_state (post model.norm)")
    # independent loss check: shifted next-token CE, mean over non-ignored labels
    with torch.no_grad():
        lg = out.logits[:, :-1].reshape(-1, 256).float()
        lb = batch["labels"][:, 1:].reshape(-1)
        l2 = torch.nn.functional.cross_entropy(lg, lb, ignore_index=-100)
        notes.append(f"hand-computed shifted CE {l2.item():.6f} vs HF {out.loss.item():.6f}")
        assert abs(l2.item() - out.loss.item()) < 1e-5

    exclude = {"lm_head.weight"} if tied else set()
    write_weights(model, os.path.join(out_dir, "model.safetensors"), exclude)
    cfg.to_json_file(os.path.join(out_dir, "config.json"))
    write_legacy_llama_config(out_dir, cfg, tied)
    ref = save_reference(out_dir, model, batch, out,
                         extra={"last_hidden_state": last.detach().float().contiguous()})
    load_back_and_compare(LlamaForCausalLM, out_dir, batch, out.logits.detach(), name)
    summarize(out_dir, ref, notes)


# ----------------------------------------------------------------------------- main

CASES = {
    "esm2_tiny": ("esm2", lambda out: make_esm(out, "esm2_tiny", 2, 64, 4, 128, seed=1234)),
    "esm2_t6shape": ("esm2", lambda out: make_esm(out, "esm2_t6shape", 1, 320, 20, 1280, seed=4321)),
    "llama_tiny": ("llama", lambda out: make_llama(out, "llama_tiny", tied=False, seed=777)),
    "llama_tied": ("llama", lambda out: make_llama(out, "llama_tied", tied=True, seed=778)),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="output root, e.g. tests/fixtures")
    ap.add_argument("--only", choices=["esm2", "llama"], help="generate only one family")
    ap.add_argument("--case", choices=sorted(CASES), action="append", help="generate only these cases")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # identical summation order wherever it runs
    print(f"python {sys.version.split()[0]}  torch {torch.__version__}  transformers {transformers.__version__}")
    os.makedirs(args.out, exist_ok=True)
    total = 0
    for cname, (family, fn) in CASES.items():
        if args.only and family != args.only:
            continue
        if args.case and cname not in args.case:
            continue
        fn(args.out)
        d = os.path.join(args.out, cname)
        total += sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
    with open(os.path.join(args.out, "GENERATED_BY.json"), "w") as f:
        json.dump({"python": sys.version.split()[0], "torch": torch.__version__,
                   "transformers": transformers.__version__,
                   "script": "tools/make_hf_fixtures.py"}, f, indent=1)
        f.write("\n")
    print(f"total fixture size: {total / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
