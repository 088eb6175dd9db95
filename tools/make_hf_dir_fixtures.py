#!/usr/bin/env python3
"""Hugging Face model directories exactly as transformers' save_pretrained writes them, plus
reference outputs, for the C++ directory-reading tests (tests/models/hf_dir_test.cpp).

Usage:
    python3 tools/make_hf_dir_fixtures.py --out tests/fixtures/hf_dirs

Needs torch, transformers (5.x) and safetensors; no network (models are built from a config
with a fixed seed). Every directory is whatever save_pretrained writes (weights names, legacy
LayerNorm names, contact head, shards, dtype): nothing is renamed or removed here.

Cases (each tests/fixtures/hf_dirs/<case>/):
  esm2_mlm       EsmForMaskedLM, fp32 (contact head included by transformers)
  esm2_sharded   the same kind of model saved with a small max_shard_size: an index.json + shards
  esm2_bf16      saved in bf16
  esm2_fp16      saved in fp16
  esm2_base      a bare EsmModel (no "esm." prefix, no LM head, with its pooler)
  llama_untied   LlamaForCausalLM with its own lm_head
  llama_tied     LlamaForCausalLM with tie_word_embeddings

reference.safetensors in each: input_ids, attention_mask, labels (all -100; I32 [B,S]) and
logits [B,S,V] (F32), or for esm2_base last_hidden_state [B,S,H]. The reference is computed by
reloading the saved directory with from_pretrained(dtype=float32) in eval mode, so it reflects
exactly the weights on disk (bf16/fp16 values widened to fp32).
"""

import argparse
import json
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import save_file  # noqa: E402

PAD, CLS, EOS = 1, 0, 2


def esm_config(**kw):
    from transformers import EsmConfig
    return EsmConfig(
        vocab_size=33, pad_token_id=PAD, mask_token_id=32, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, hidden_act="gelu", hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0, max_position_embeddings=1026,
        position_embedding_type="rotary", token_dropout=True, emb_layer_norm_before=False,
        layer_norm_eps=1e-5, initializer_range=0.02, tie_word_embeddings=True, **kw)


def llama_config(tied):
    from transformers import LlamaConfig
    return LlamaConfig(
        vocab_size=256, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, hidden_act="silu",
        max_position_embeddings=128, rms_norm_eps=1e-5, tie_word_embeddings=tied,
        attention_bias=False, mlp_bias=False, bos_token_id=2, eos_token_id=0, pad_token_id=1,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0})


def spread(model, seed):
    """Larger-than-default random values (so every logit matters), fixed by the seed."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))


def esm_inputs():
    g = torch.Generator().manual_seed(5)
    res = torch.randint(4, 24, (2, 12), generator=g)
    ids = torch.cat([torch.full((2, 1), CLS), res, torch.full((2, 1), EOS)], 1)
    return ids


def llama_inputs():
    g = torch.Generator().manual_seed(6)
    acgt = torch.tensor([65, 67, 71, 84])
    ids = acgt[torch.randint(0, 4, (2, 14), generator=g)]
    ids[:, 0] = 2
    return ids


def tensor_names(out_dir):
    names = {}
    for fn in sorted(os.listdir(out_dir)):
        if fn.endswith(".safetensors") and fn != "reference.safetensors":
            with safe_open(os.path.join(out_dir, fn), "pt") as f:
                for k in f.keys():
                    names[k] = (fn, str(f.get_slice(k).get_dtype()))
    return names


def make(out_root, name, build, cls, inputs, save_kw=None, dtype=None, want="logits"):
    out_dir = os.path.join(out_root, name)
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(0)
    model = build()
    spread(model, seed=sum(map(ord, name)))
    if dtype is not None:
        model = model.to(dtype)
    model.save_pretrained(out_dir, **(save_kw or {}))
    # reference from what is on disk, in fp32
    m2 = cls.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager").eval()
    ids = inputs()
    am = torch.ones_like(ids)
    with torch.no_grad():
        out = m2(input_ids=ids, attention_mask=am)
    ref = {"input_ids": ids.to(torch.int32).contiguous(), "attention_mask": am.to(torch.int32).contiguous(),
           "labels": torch.full_like(ids, -100).to(torch.int32).contiguous()}
    ref[want] = getattr(out, want).float().contiguous()
    save_file(ref, os.path.join(out_dir, "reference.safetensors"), metadata={"format": "pt"})
    print(f"== {name}")
    for fn in sorted(os.listdir(out_dir)):
        print(f"   {fn:40s} {os.path.getsize(os.path.join(out_dir, fn)):>8d} bytes")
    for k, (fn, dt) in tensor_names(out_dir).items():
        print(f"   {k:60s} {dt:6s} {fn}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    from transformers import EsmForMaskedLM, EsmModel, LlamaForCausalLM
    print(f"python {sys.version.split()[0]}  torch {torch.__version__}  transformers {transformers.__version__}")
    os.makedirs(args.out, exist_ok=True)
    esm_mlm = lambda: EsmForMaskedLM(esm_config()).float()  # noqa: E731
    make(args.out, "esm2_mlm", esm_mlm, EsmForMaskedLM, esm_inputs)
    make(args.out, "esm2_sharded", esm_mlm, EsmForMaskedLM, esm_inputs, save_kw={"max_shard_size": "30KB"})
    make(args.out, "esm2_bf16", esm_mlm, EsmForMaskedLM, esm_inputs, dtype=torch.bfloat16)
    make(args.out, "esm2_fp16", esm_mlm, EsmForMaskedLM, esm_inputs, dtype=torch.float16)
    make(args.out, "esm2_base", lambda: EsmModel(esm_config()).float(), EsmModel,
         esm_inputs, want="last_hidden_state")
    make(args.out, "llama_untied", lambda: LlamaForCausalLM(llama_config(False)).float(), LlamaForCausalLM,
         llama_inputs)
    make(args.out, "llama_tied", lambda: LlamaForCausalLM(llama_config(True)).float(), LlamaForCausalLM,
         llama_inputs)
    with open(os.path.join(args.out, "GENERATED_BY.json"), "w") as f:
        json.dump({"python": sys.version.split()[0], "torch": torch.__version__,
                   "transformers": transformers.__version__, "script": "tools/make_hf_dir_fixtures.py"}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
