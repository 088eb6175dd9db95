#!/usr/bin/env python3
"""Prove that a biofm export loads in Hugging Face transformers and computes what biofm computes.

Usage:
    biofm embed --model DIR --input F.fasta --output OURS.safetensors --per-token --logits --device cpu
    python3 tools/check_hf_export.py --model DIR --ours OURS.safetensors [--fasta F.fasta] \
        [--atol 1e-4] [--device cpu|cuda]

DIR is loaded strictly offline (local_files_only) with AutoTokenizer and AutoModelForMaskedLM
(AutoModelForCausalLM when config.json has model_type "llama"), in fp32, eval mode,
attn_implementation="eager".

OURS.safetensors (written by `biofm embed ... --per-token --logits`):
  input_ids        I32 [T]     all sequences' token ids concatenated, each with its specials
  offsets          I64 [n+1]   sequence boundaries in the T rows (I32 accepted too)
  token_embeddings F32 [T,H]   final hidden states after the final norm
                               (ESM: emb_layer_norm_after, Llama: model.norm)
  logits           F32 [T,V]   (optional: skipped when absent)
  embeddings       F32 [n,H]   per-sequence mean of token_embeddings over the sequence's tokens
                               EXCLUDING the first and last special token (<cls>/<eos> for ESM,
                               <BOS>/<EOS> for Llama); specials in the middle (e.g. <unk>) count.

For every sequence: the HF tokenizer's ids must equal ours (when --fasta is given and its record
count equals n; without --fasta our ids are turned back into text and re-tokenized), then the
HF model runs on our ids alone (batch 1, no padding, no masking) and logits / hidden states /
the pooled embedding are compared by max absolute difference. Exit status: 0 all within atol,
1 some mismatch, 2 unusable input.

Note: ESM's token dropout is active in HF in eval mode too: with no <mask> in the input every
embedding is scaled by (1 - 0.15*0.8) = 0.88, so biofm must apply it for plain inference as well.
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


def read_fasta(path):
    recs, name, buf = [], None, []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            if line.startswith(">"):
                if name is not None:
                    recs.append((name, "".join(buf)))
                words = line[1:].split()
                name, buf = (words[0] if words else ""), []
            else:
                if name is None:
                    name = ""
                buf.append(line)
    if name is not None:
        recs.append((name, "".join(buf)))
    return recs


class NucleotideTokenizer:
    """Fallback for Llama exports without HF tokenizer files: biofm's byte tokenizer
    (id = ord(c); 0 <EOS>, 1 <PAD>, 2 <BOS>, 3 <UNK>; template <BOS> SEQ <EOS>)."""
    bos_token_id, eos_token_id, pad_token_id = 2, 0, 1

    def encode(self, seq):
        return [2] + [ord(c) if 3 < ord(c) < 256 else 3 for c in seq] + [0]

    def decode_inner(self, ids):
        return "".join(chr(i) for i in ids)


def load_tokenizer(model_dir, model_type):
    try:
        tok = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
        return tok, type(tok).__name__
    except Exception as e:
        if model_type == "llama":
            msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
            print(f"note: AutoTokenizer failed ({type(e).__name__}: {msg}); using the built-in "
                  f"nucleotide byte tokenizer")
            return NucleotideTokenizer(), "NucleotideTokenizer(builtin)"
        raise


def hf_encode(tok, seq):
    if isinstance(tok, NucleotideTokenizer):
        return tok.encode(seq)
    return list(tok(seq, add_special_tokens=True)["input_ids"])


def inner_text(tok, ids):
    """Our ids (with specials) back to the residue string, for the round-trip check."""
    inner = ids[1:-1]
    if isinstance(tok, NucleotideTokenizer):
        return tok.decode_inner(inner)
    return "".join(tok.convert_ids_to_tokens(inner))


def load_model(model_dir, model_type, device):
    cls = transformers.AutoModelForCausalLM if model_type == "llama" else transformers.AutoModelForMaskedLM
    kw = dict(local_files_only=True, attn_implementation="eager")
    try:
        model = cls.from_pretrained(model_dir, dtype=torch.float32, **kw)
    except TypeError:  # transformers < 4.56
        model = cls.from_pretrained(model_dir, torch_dtype=torch.float32, **kw)
    model.eval().to(device)
    for n, p in model.named_parameters():
        if p.dtype != torch.float32:
            raise SystemExit(f"parameter {n} loaded as {p.dtype}, expected float32")
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="exported HF model directory")
    ap.add_argument("--ours", required=True, help="safetensors written by biofm embed --per-token --logits")
    ap.add_argument("--fasta", help="the FASTA given to biofm embed (checks tokenization)")
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--device", default="cpu", help="torch device for the HF model (default cpu)")
    args = ap.parse_args()

    if args.device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    print(f"transformers {transformers.__version__}  torch {torch.__version__}  device {args.device}")

    cfg_path = os.path.join(args.model, "config.json")
    if not os.path.exists(cfg_path):
        print(f"error: {cfg_path} not found", file=sys.stderr)
        return 2
    with open(cfg_path) as f:
        model_type = json.load(f).get("model_type")
    tok, tok_name = load_tokenizer(args.model, model_type)
    model = load_model(args.model, model_type, args.device)
    print(f"model_type {model_type}  model {type(model).__name__}  tokenizer {tok_name}  "
          f"attn {model.config._attn_implementation}")

    ours = load_file(args.ours)
    for k in ("input_ids", "offsets", "token_embeddings"):
        if k not in ours:
            print(f"error: {args.ours} lacks tensor '{k}' (has {sorted(ours)})", file=sys.stderr)
            return 2
    ids_all = ours["input_ids"].long()
    offs = ours["offsets"].long().tolist()
    T = ids_all.numel()
    n = len(offs) - 1
    if offs[0] != 0 or offs[-1] != T or any(b <= a for a, b in zip(offs, offs[1:])):
        print(f"error: bad offsets {offs[:8]}... for T={T}", file=sys.stderr)
        return 2
    tok_emb = ours["token_embeddings"].float()
    logits = ours.get("logits")
    embs = ours.get("embeddings")
    if tok_emb.shape[0] != T or (logits is not None and logits.shape[0] != T):
        print("error: token_embeddings/logits rows != len(input_ids)", file=sys.stderr)
        return 2
    if embs is not None and embs.shape[0] != n:
        print(f"error: embeddings has {embs.shape[0]} rows, offsets say {n} sequences", file=sys.stderr)
        return 2

    records = read_fasta(args.fasta) if args.fasta else None
    if records is not None and len(records) != n:
        print(f"note: FASTA has {len(records)} records but {args.ours} has {n} sequences "
              f"(windowing?); tokenization is checked by round trip instead")
        records = None

    print("pooled 'embeddings' are compared with the mean of HF's final hidden states over each "
          "sequence's tokens excluding the first/last special (<cls>/<eos> or <BOS>/<EOS>)")
    hdr = f"{'#':>4} {'name':20s} {'len':>6} {'ids':>4} {'max|dlogits|':>13} {'max|dhidden|':>13} {'max|demb|':>11} {'max|ref h|':>10}  status"
    print(hdr)
    print("-" * len(hdr))
    worst = {"logits": 0.0, "hidden": 0.0, "emb": 0.0}
    bad = 0
    for i in range(n):
        a, b = offs[i], offs[i + 1]
        ids = ids_all[a:b].tolist()
        name = records[i][0] if records else f"seq{i}"
        if records:
            want = hf_encode(tok, records[i][1])
        else:
            want = hf_encode(tok, inner_text(tok, ids))
        ids_ok = want == ids
        x = torch.tensor(ids, dtype=torch.long, device=args.device)[None]
        with torch.no_grad():
            out = model(input_ids=x, attention_mask=torch.ones_like(x), output_hidden_states=True)
        ref_h = out.hidden_states[-1][0].float().cpu()  # == base_model(...).last_hidden_state (post final norm)
        ref_l = out.logits[0].float().cpu()
        dh = (tok_emb[a:b] - ref_h).abs().max().item()
        dl = (logits[a:b].float() - ref_l).abs().max().item() if logits is not None else float("nan")
        de = float("nan")
        note = ""
        if embs is not None:
            inner = ref_h[1:-1] if ref_h.shape[0] > 2 else ref_h
            de = (embs[i].float() - inner.mean(0)).abs().max().item()
            if de > args.atol:
                de_all = (embs[i].float() - ref_h.mean(0)).abs().max().item()
                if de_all <= args.atol:
                    note = " (embeddings match the mean INCLUDING specials)"
        ok = ids_ok and dh <= args.atol and (logits is None or dl <= args.atol) and (embs is None or de <= args.atol)
        bad += not ok
        worst["hidden"] = max(worst["hidden"], dh)
        if logits is not None:
            worst["logits"] = max(worst["logits"], dl)
        if embs is not None:
            worst["emb"] = max(worst["emb"], de)
        print(f"{i:>4} {name[:20]:20s} {b - a:>6} {'ok' if ids_ok else 'BAD':>4} {dl:>13.3e} {dh:>13.3e} "
              f"{de:>11.3e} {ref_h.abs().max().item():>10.3g}  {'ok' if ok else 'FAIL'}{note}")
        if not ids_ok:
            print(f"     ours {ids[:12]}{'...' if len(ids) > 12 else ''}\n     hf   {want[:12]}{'...' if len(want) > 12 else ''}")
    print("-" * len(hdr))
    print(f"{n} sequences, {T} tokens; worst max|dlogits| {worst['logits']:.3e}, max|dhidden| "
          f"{worst['hidden']:.3e}, max|demb| {worst['emb']:.3e}; atol {args.atol:g}")
    if logits is None:
        print("note: no 'logits' tensor in ours; logits not compared")
    if embs is None:
        print("note: no 'embeddings' tensor in ours; pooled embeddings not compared")
    print(f"{n - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
