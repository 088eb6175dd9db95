#!/usr/bin/env python3
"""Per-kernel-family GPU time of one training step from an ncu CSV (tools/gpu_session.sh profile_*).

Usage: python3 tools/ncu_summary.py NCU.csv[.gz] [--top 24]
The CSV is ncu's `--metrics gpu__time_duration.sum --csv` output of a `biofm bench` run with
--warmup 1 --steps 1; the second step (from the second embedding_forward kernel on) is summarised,
so one-time setup (plan building, first-touch allocation) is left out. ncu runs kernels one at a
time at locked clocks: shares are what to read, absolute times run above the benchmark's.
"""
import argparse
import collections
import csv
import gzip
import re


def family(name):
    if "nvjet" in name or "gemm" in name.lower() or "cutlass" in name:
        return "cuBLASLt GEMM"
    if "sdpa" in name and "bprop" in name:
        return "cuDNN SDPA backward"
    if "sdpa" in name and "fprop" in name:
        return "cuDNN SDPA forward"
    if "Bgrad" in name:
        return "cuBLASLt bias-gradient epilogue"
    if "cudnn" in name:
        return "cuDNN " + re.sub(r"\(.*", "", name).replace("void ", "")[:50]
    m = re.search(r"ops::<unnamed>::(\w+)", name) or re.search(r"(\w+kernel\w*)", name)
    return m.group(1) if m else name[:60]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=24)
    a = p.parse_args()
    opener = gzip.open if a.csv.endswith(".gz") else open
    with opener(a.csv, "rt") as f:
        lines = [line for line in f if line.startswith('"')]
    reader = csv.reader(lines)
    header = next(reader)
    kernels = []
    for row in reader:
        d = dict(zip(header, row))
        kernels.append((d["Kernel Name"], float(d["Metric Value"].replace(",", "")) / 1e3))
    starts = [i for i, (n, _) in enumerate(kernels) if "embedding_forward_kernel" in n]
    if len(starts) < 2:
        raise SystemExit("expected two steps (two embedding_forward kernels) in the profile")
    step = kernels[starts[1]:]
    agg = collections.defaultdict(lambda: [0.0, 0])
    for n, us in step:
        agg[family(n)][0] += us
        agg[family(n)][1] += 1
    total = sum(v[0] for v in agg.values())
    print(f"one step: {len(step)} kernels, {total / 1e3:.1f} ms GPU time (ncu, locked clocks)")
    for k, (us, n) in sorted(agg.items(), key=lambda x: -x[1][0])[: a.top]:
        print(f"{100 * us / total:6.1f}%  {us / 1e3:8.2f} ms  {n:5d} launches  {k}")


if __name__ == "__main__":
    main()
