#!/usr/bin/env python3
"""PyTorch's SDPA backends on one attention shape, for comparison with bench/attention_bench.cpp.

Times forward and backward of torch.nn.functional.scaled_dot_product_attention (bf16, [B, H, S, D],
GQA by repeating kv heads, as HF Llama does) for each backend torch offers (FlashAttention-2,
cuDNN, memory-efficient), with the FLOP convention of attention_bench: forward 4·B·S²·Hq·D
(halved when causal), backward 2.5× forward. Needs a GPU and torch.

Usage: python3 bench/sdpa_backends_probe.py [--b 1] [--s 8192] [--hq 32] [--hkv 8] [--d 64] [--causal] [--iters 20]
"""
import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--b", type=int, default=1)
    ap.add_argument("--s", type=int, default=8192)
    ap.add_argument("--hq", type=int, default=32)
    ap.add_argument("--hkv", type=int, default=8)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--iters", type=int, default=20)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = "cuda"
    q = torch.randn(a.b, a.hq, a.s, a.d, device=dev, dtype=torch.bfloat16, requires_grad=True)
    k = torch.randn(a.b, a.hkv, a.s, a.d, device=dev, dtype=torch.bfloat16, requires_grad=True)
    v = torch.randn(a.b, a.hkv, a.s, a.d, device=dev, dtype=torch.bfloat16, requires_grad=True)
    rep = a.hq // a.hkv
    flops = 4.0 * a.b * a.s * a.s * a.hq * a.d * (0.5 if a.causal else 1.0)
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        try:
            with sdpa_kernel([be]):
                kk, vv = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
                kk.retain_grad(), vv.retain_grad()
                out = F.scaled_dot_product_attention(q, kk, vv, is_causal=a.causal)
                g = torch.randn_like(out)
                for _ in range(3):
                    out = F.scaled_dot_product_attention(q, kk, vv, is_causal=a.causal)
                    out.backward(g, retain_graph=False)
                torch.cuda.synchronize()
                e0, e1, e2 = (torch.cuda.Event(enable_timing=True) for _ in range(3))
                e0.record()
                for _ in range(a.iters):
                    with torch.no_grad():
                        F.scaled_dot_product_attention(q, kk, vv, is_causal=a.causal)
                e1.record()
                outs = []
                for _ in range(a.iters):
                    outs.append(F.scaled_dot_product_attention(q, kk.detach().requires_grad_(), vv.detach().requires_grad_(), is_causal=a.causal))
                torch.cuda.synchronize()
                e1b = torch.cuda.Event(enable_timing=True)
                e1b.record()
                for o in outs:
                    o.backward(g)
                e2.record()
                torch.cuda.synchronize()
                f_ms = e0.elapsed_time(e1) / a.iters
                b_ms = e1b.elapsed_time(e2) / a.iters
                print(f"{name:10s} B={a.b} S={a.s} Hq={a.hq} Hkv={a.hkv} D={a.d} {'causal' if a.causal else 'bidir'}  "
                      f"fwd {f_ms:7.3f} ms {flops / f_ms / 1e9:7.1f} TFLOP/s   bwd {b_ms:7.3f} ms {2.5 * flops / b_ms / 1e9:7.1f} TFLOP/s")
        except Exception as ex:  # a backend that does not take the shape
            print(f"{name:10s} unavailable: {str(ex).splitlines()[0][:150]}")


if __name__ == "__main__":
    main()
