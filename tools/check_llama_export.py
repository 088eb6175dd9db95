#!/usr/bin/env python3
"""Prove that a biofm Llama export loads in Hugging Face transformers and computes what biofm computes.

Usage:
    biofm eval --model DIR --input F.fasta --dump-logits OURS.safetensors [--max-seq-length N --stride S]
    python3 tools/check_llama_export.py --model DIR --fasta F.fasta --ours OURS.safetensors \
        [--atol 1e-4] [--max-windows 0]
  or let the script run biofm itself:
    python3 tools/check_llama_export.py --model DIR --fasta F.fasta --biofm build/biofm [--max-seq-length N]

`--dump-logits` is a hidden option of `biofm eval` (Llama models only). OURS.safetensors holds:
  logits          F32 [T,V]  every evaluation window's logits, windows concatenated
  input_ids       I32 [T]    the windows' token ids (<BOS> bases <EOS>)
  labels          I32 [T]    next-token targets scored by eval (-100 elsewhere)
  token_losses    F32 [T]    biofm's per-token NLL (0 where labels == -100)
  window_offsets  I64 [W+1]  first row of each window
  window_record   I64 [W]    FASTA record index of each window
  window_start    I64 [W]    first base of each window inside its record

Checks, each reported:
  1. LlamaForCausalLM.from_pretrained(DIR) loads in fp32 (strictly offline, eager attention)
     with no missing or unexpected weights.
  2. AutoTokenizer.from_pretrained(DIR) turns each window's bases into exactly biofm's ids
     (<BOS> ... <EOS> added by the tokenizer's post-processor).
  3. The HF model on biofm's ids (batch 1, no padding) gives the same logits (max abs diff
     <= atol) and the same per-token NLL on the scored targets.
Exit status: 0 all good, 1 a mismatch, 2 unusable input.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors.torch import load_file  # noqa: E402


def read_fasta(path):
    """Records as biofm reads them: header's first word as name, all whitespace removed."""
    recs, name, buf = [], None, []
    with open(path) as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith(">"):
                if name is not None:
                    recs.append((name, "".join(buf)))
                words = s[1:].split()
                name, buf = (words[0] if words else ""), []
            else:
                buf.append("".join(s.split()))
    if name is not None:
        recs.append((name, "".join(buf)))
    return [(n, s) for n, s in recs if s]  # biofm skips empty records


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="Hugging Face directory written by biofm (final_model)")
    ap.add_argument("--fasta", required=True)
    ap.add_argument("--ours", help="safetensors written by `biofm eval --dump-logits`")
    ap.add_argument("--biofm", help="biofm binary: run eval --dump-logits here when --ours is absent")
    ap.add_argument("--max-seq-length", type=int, default=8192)
    ap.add_argument("--stride", type=int, default=200)
    ap.add_argument("--atol", type=float, default=1e-4)
    ap.add_argument("--max-windows", type=int, default=0, help="check only the first N windows (0 = all)")
    args = ap.parse_args()

    ours_path = args.ours
    if ours_path is None:
        if not args.biofm:
            print("need --ours or --biofm", file=sys.stderr)
            return 2
        ours_path = os.path.join(tempfile.mkdtemp(prefix="biofm_llama_check_"), "ours.safetensors")
        cmd = [args.biofm, "eval", "--model", args.model, "--input", args.fasta, "--dump-logits", ours_path,
               "--max-seq-length", str(args.max_seq_length), "--stride", str(args.stride),
               "--device", "cpu"]  # the fp32 reference (eval defaults to the GPU in bf16)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"biofm eval failed ({r.returncode}):\n{r.stdout}{r.stderr}", file=sys.stderr)
            return 2
        print(f"biofm eval: loss {json.loads(r.stdout)['loss']:.6f}")

    ours = load_file(ours_path)
    for k in ("logits", "input_ids", "labels", "token_losses", "window_offsets", "window_record", "window_start"):
        if k not in ours:
            print(f"{ours_path}: no '{k}' (write it with `biofm eval --dump-logits`)", file=sys.stderr)
            return 2
    recs = read_fasta(args.fasta)

    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    model, info = transformers.LlamaForCausalLM.from_pretrained(
        args.model, dtype=torch.float32, attn_implementation="eager", local_files_only=True,
        output_loading_info=True)
    model.eval()
    bad_keys = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    print(f"[1] LlamaForCausalLM loaded: {sum(p.numel() for p in model.parameters())} parameters, "
          f"tie_word_embeddings={model.config.tie_word_embeddings}, "
          f"rope={getattr(model.config, 'rope_parameters', None)}; loading problems: {bad_keys or 'none'}")
    tok = transformers.AutoTokenizer.from_pretrained(args.model, local_files_only=True)
    print(f"[2] AutoTokenizer loaded: {type(tok).__name__}, vocab {len(tok)}, bos {tok.bos_token_id} "
          f"eos {tok.eos_token_id} pad {tok.pad_token_id}")

    offs = ours["window_offsets"].tolist()
    W = len(offs) - 1
    if args.max_windows > 0:
        W = min(W, args.max_windows)
    tok_mismatch = 0
    worst_logit, worst_nll, ok = 0.0, 0.0, True
    n_scored = 0
    for w in range(W):
        a, b = offs[w], offs[w + 1]
        ids = ours["input_ids"][a:b].long()
        r, start = int(ours["window_record"][w]), int(ours["window_start"][w])
        if r >= len(recs):
            print(f"window {w}: record {r} not in {args.fasta}", file=sys.stderr)
            return 2
        bases = recs[r][1][start:start + (b - a - 2)]
        hf_ids = tok(bases)["input_ids"]
        if hf_ids != ids.tolist():
            tok_mismatch += 1
            if tok_mismatch <= 3:
                print(f"  window {w}: tokenizer ids differ (first 10 HF {hf_ids[:10]} vs ours {ids.tolist()[:10]})")
        with torch.no_grad():
            lg = model(input_ids=ids[None]).logits[0].float()
        d = (lg - ours["logits"][a:b]).abs().max().item()
        worst_logit = max(worst_logit, d)
        lab = ours["labels"][a:b].long()
        m = lab != -100
        if m.any():
            nll = -torch.log_softmax(lg, -1)[m].gather(1, lab[m][:, None])[:, 0]
            worst_nll = max(worst_nll, (nll - ours["token_losses"][a:b][m]).abs().max().item())
            n_scored += int(m.sum())
    ok = not bad_keys and tok_mismatch == 0 and worst_logit <= args.atol and worst_nll <= args.atol
    print(f"[2] tokenizer: {W - tok_mismatch}/{W} windows tokenize to biofm's ids")
    print(f"[3] {W} windows, {offs[W]} tokens, {n_scored} scored: max|logits - HF| {worst_logit:.3g}, "
          f"max|NLL - HF| {worst_nll:.3g} (atol {args.atol})")
    print("OK: the export loads in transformers and matches biofm" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
