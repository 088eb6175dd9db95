#!/usr/bin/env python3
"""A large protein FASTA corpus for data-pipeline benchmarks: the bundled real proteins
(data/proteins_sample.fasta) repeated with random point mutations until the requested size.

    python3 tools/make_protein_corpus.py --mb 300 --files 8 --out /tmp/corpus [--mutation-rate 0.05]

Writes OUT/part_00000.fasta ... (60-column lines, unique names >syn_<file>_<record>), deterministic
for a given --seed. Used by bench/data_bench.sh; nothing here is needed at run time.
"""
import argparse
import os
import random

AMINO = "ACDEFGHIKLMNPQRSTVWY"


def read_fasta(path):
    seqs, cur = [], []
    with open(path) as f:
        for line in f:
            if line.startswith(">"):
                if cur:
                    seqs.append("".join(cur))
                cur = []
            else:
                cur.append(line.strip())
    if cur:
        seqs.append("".join(cur))
    return seqs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mb", type=float, required=True, help="total size in MB (10^6 bytes)")
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--out", required=True)
    p.add_argument("--mutation-rate", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--source", default=os.path.join(os.path.dirname(__file__), "..", "data", "proteins_sample.fasta"))
    a = p.parse_args()
    base = read_fasta(a.source)
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    per_file = int(a.mb * 1e6 / a.files)
    for k in range(a.files):
        written, r = 0, 0
        with open(os.path.join(a.out, "part_%05d.fasta" % k), "w") as f:
            while written < per_file:
                s = list(base[rng.randrange(len(base))])
                for _ in range(max(1, int(len(s) * a.mutation_rate))):
                    s[rng.randrange(len(s))] = AMINO[rng.randrange(20)]
                s = "".join(s)
                rec = ">syn_%d_%d\n%s\n" % (k, r, "\n".join(s[i:i + 60] for i in range(0, len(s), 60)))
                f.write(rec)
                written += len(rec)
                r += 1
    print("wrote %d files, %.1f MB, in %s" % (a.files, a.files * per_file / 1e6, a.out))


if __name__ == "__main__":
    main()
