#!/usr/bin/env python3
"""biofm embed vs Hugging Face transformers on the same proteins and the same ESM-2 weights.

Makes an ESM-2 model directory of the chosen shape (random init, written by transformers'
save_pretrained in fp32), takes the first --records proteins of --data (each cut to
--max-seq-length - 2 residues, so both sides see the same tokens), then times:

  HF:    EsmModel in bf16 with SDPA under torch.inference_mode(), proteins sorted by length and
         padded into batches of at most --tokens-per-batch tokens (padding included), mean of
         the final hidden states over residues, copied to the host; a short warm-up first
         (--compile: torch.compile(dynamic=True), warm-up over every batch once, then timed).
  biofm: `biofm embed --device cuda` in bf16 (default) and in fp32 (--precision fp32); its own
         timing of the embedding loop (model loading excluded, as on the HF side), read from
         its summary line.

Prints sequences/s and tokens/s (real tokens: residues + <cls> + <eos>) for each, the speed-up,
and the errors of the bf16 embeddings against biofm fp32: max over proteins of
max|e_bf16 - e_fp32| / max|e_fp32| and the smallest cosine similarity (HF bf16 too, which also
checks that both read the same model).
"""
import argparse
import gzip
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

ESM_VOCAB = ["<cls>", "<pad>", "<eos>", "<unk>", "L", "A", "G", "V", "S", "E", "R", "T", "I", "D", "P", "K",
             "Q", "N", "F", "Y", "M", "H", "W", "C", "X", "B", "U", "Z", "O", ".", "-", "<null_1>", "<mask>"]


def read_fasta(path, limit):
    opener = gzip.open if path.endswith(".gz") else open
    recs, name, seq = [], None, []
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                if name is not None and seq:
                    recs.append((name, "".join(seq)))
                    if len(recs) == limit:
                        return recs
                name, seq = line[1:].split()[0] if len(line) > 1 else f"r{len(recs)}", []
            elif line:
                seq.append(line)
    if name is not None and seq and len(recs) < limit:
        recs.append((name, "".join(seq)))
    return recs


def run_biofm(binary, model_dir, fasta, out, tokens, precision):
    cmd = [binary, "embed", "--model", model_dir, "--input", fasta, "--output", out, "--device", "cuda",
           "--max-tokens", str(tokens), "--precision", precision]
    print("+", " ".join(cmd), flush=True)
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    sys.stdout.write(p.stdout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        raise SystemExit(f"biofm embed failed ({p.returncode})")
    m = re.search(r"(\d+) records in ([0-9.]+) s: ([0-9.]+) records/s, ([0-9.]+) tokens/s", p.stdout)
    if not m:
        raise SystemExit("could not read biofm's timing line")
    return {"seconds": float(m.group(2)), "seq_per_s": float(m.group(3)), "tok_per_s": float(m.group(4)),
            "wall_s": wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--biofm", required=True, help="the biofm binary")
    ap.add_argument("--data", default=",".join(os.path.join(HERE, "..", "data", f) for f in
                                               ("proteins_sample.fasta", "proteins_val.fasta")),
                    help="FASTA file(s), plain or .gz, comma-separated (default: the bundled 2,200 proteins)")
    ap.add_argument("--records", type=int, default=4000)
    ap.add_argument("--shape", default="650M")
    ap.add_argument("--max-seq-length", type=int, default=1024)
    ap.add_argument("--tokens-per-batch", type=int, default=16384)
    ap.add_argument("--compile", action="store_true", help="also time HF under torch.compile")
    ap.add_argument("--out", default=os.path.join(HERE, "out", "embed_vs_hf"))
    a = ap.parse_args()

    import torch
    from hf_peer_bench import build_esm
    from safetensors.numpy import load_file

    os.makedirs(a.out, exist_ok=True)
    model_dir = os.path.join(a.out, f"esm2_{a.shape}")
    torch.manual_seed(0)
    model, dims = build_esm(a.shape)
    if not os.path.exists(os.path.join(model_dir, "config.json")):
        model.save_pretrained(model_dir)  # fp32 safetensors + config.json
    recs = []
    for path in a.data.split(","):  # several files: read in order until --records
        recs += read_fasta(path, a.records - len(recs))
        if len(recs) >= a.records:
            break
    recs = [(n, s[: a.max_seq_length - 2]) for n, s in recs]
    fasta = os.path.join(a.out, "input.fasta")
    with open(fasta, "w") as f:
        for n, s in recs:
            f.write(f">{n}\n{s}\n")
    n_tokens = sum(len(s) + 2 for _, s in recs)
    print(f"{len(recs)} proteins from {a.data}, {n_tokens} tokens (mean {n_tokens / len(recs):.0f}); "
          f"ESM-2 {a.shape} {dims}", flush=True)

    # ---- Hugging Face, bf16, SDPA, length-sorted padded batches.
    index = {t: i for i, t in enumerate(ESM_VOCAB)}
    enc = [[0] + [index.get(c, 3) for c in s.upper()] + [2] for _, s in recs]
    order = sorted(range(len(enc)), key=lambda i: -len(enc[i]))
    batches, cur = [], []
    for i in order:
        if cur and (len(cur) + 1) * len(enc[cur[0]]) > a.tokens_per_batch:
            batches.append(cur)
            cur = []
        cur.append(i)
    batches.append(cur)
    esm = model.esm.to("cuda", torch.bfloat16).eval()

    def hf_pass(net, which):
        out = [None] * len(enc)
        for b in which:
            S = len(enc[b[0]])
            ids = torch.full((len(b), S), 1, dtype=torch.long)
            mask = torch.zeros((len(b), S), dtype=torch.long)
            for r, i in enumerate(b):
                ids[r, : len(enc[i])] = torch.tensor(enc[i])
                mask[r, : len(enc[i])] = 1
            ids, mask = ids.cuda(non_blocking=True), mask.cuda(non_blocking=True)
            h = net(input_ids=ids, attention_mask=mask).last_hidden_state.float()
            res = mask.clone()
            res[:, 0] = 0
            res[torch.arange(len(b), device=res.device), mask.sum(1) - 1] = 0  # residues only
            pooled = (h * res.unsqueeze(-1)).sum(1) / res.sum(1, keepdim=True)
            pooled = pooled.cpu()
            for r, i in enumerate(b):
                out[i] = pooled[r]
        return out

    results = {}
    with torch.inference_mode():
        variants = [("hf_bf16", esm)]
        if a.compile:
            variants.append(("hf_bf16_compile", torch.compile(esm, dynamic=True)))
        for name, net in variants:
            hf_pass(net, batches if name.endswith("compile") else batches[:3])  # warm-up
            torch.cuda.synchronize()
            t0 = time.time()
            emb = hf_pass(net, batches)
            torch.cuda.synchronize()
            s = time.time() - t0
            results[name] = {"seconds": s, "seq_per_s": len(recs) / s, "tok_per_s": n_tokens / s}
            if name == "hf_bf16":
                hf_emb = torch.stack(emb)
    del esm, model
    torch.cuda.empty_cache()

    # ---- biofm, bf16 and fp32.
    outs = {}
    for prec in ("bf16", "fp32"):
        path = os.path.join(a.out, f"biofm_{prec}.safetensors")
        results[f"biofm_{prec}"] = run_biofm(a.biofm, model_dir, fasta, path, a.tokens_per_batch, prec)
        outs[prec] = torch.from_numpy(load_file(path)["embeddings"]).float()

    ref = outs["fp32"]

    def errors(x):
        rel = ((x - ref).abs().amax(1) / ref.abs().amax(1)).max().item()
        cos = torch.nn.functional.cosine_similarity(x, ref, dim=1).min().item()
        return rel, cos

    print()
    print(f"{'run':<18}{'seq/s':>10}{'tokens/s':>12}{'vs HF bf16':>12}{'max rel err':>14}{'min cos':>10}")
    base = results["hf_bf16"]["seq_per_s"]
    for name, r in results.items():
        err = ""
        if name == "biofm_bf16":
            rel, cos = errors(outs["bf16"])
            err = f"{rel:>14.2e}{cos:>10.5f}"
        elif name == "hf_bf16":
            rel, cos = errors(hf_emb)
            err = f"{rel:>14.2e}{cos:>10.5f}"
        print(f"{name:<18}{r['seq_per_s']:>10.1f}{r['tok_per_s']:>12.0f}{r['seq_per_s'] / base:>11.2f}x{err}")
    print("(errors against biofm fp32 embeddings of the same weights)")
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump({"records": len(recs), "tokens": n_tokens, "shape": a.shape, "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
