"""The Python package (python/biofm) against the `biofm` binary: the same embeddings as
`biofm embed` writes (same engine, same defaults), layer selection, errors, load_metrics."""
import json
import os
import subprocess
import tempfile
import unittest
import warnings

import numpy as np

import biofm

SRC = os.environ["BIOFM_SOURCE_DIR"]
BINARY = os.environ["BIOFM_BINARY"]
ESM = os.path.join(SRC, "tests", "fixtures", "esm2_tiny")


def fasta_records(path, n):
    names, seqs = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                if len(names) == n:
                    break
                names.append(line[1:])
                seqs.append("")
            elif names:
                seqs[-1] += line
    return names, seqs


class EmbedTest(unittest.TestCase):
    def test_matches_the_cli(self):
        names, seqs = fasta_records(os.path.join(SRC, "data", "proteins_val.fasta"), 12)
        got = biofm.embed(ESM, seqs, device="cpu")
        self.assertEqual(got.dtype, np.float32)
        self.assertEqual(got.shape[0], 12)
        with tempfile.TemporaryDirectory() as d:
            fa = os.path.join(d, "in.fasta")
            with open(fa, "w") as f:
                for n, s in zip(names, seqs):
                    f.write(f">{n}\n{s}\n")
            out = os.path.join(d, "npy")
            subprocess.run([BINARY, "embed", "--model", ESM, "--input", fa, "--device", "cpu", "--output", out,
                            "--output-format", "npy"], check=True, capture_output=True)
            want = np.load(os.path.join(out, "embeddings.npy"))
        self.assertEqual(want.shape, got.shape)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        self.assertGreater(float(np.abs(got).sum()), 0.0)

    def test_layers_and_pooling(self):
        seqs = ["MKTAYIAKQRQISFVKSHFSRQ", "MSEQNNTEMTFQIQRIYTKDIS", "MA"]
        by_layer = biofm.embed(ESM, seqs, layers=[0, -1], device="cpu")
        with open(os.path.join(ESM, "config.json")) as f:
            L = json.load(f)["num_hidden_layers"]
        self.assertEqual(sorted(by_layer), [0, L])
        self.assertFalse(np.allclose(by_layer[0], by_layer[L]))
        last = biofm.embed(ESM, seqs, layers=-1, device="cpu")
        np.testing.assert_allclose(last, by_layer[L], atol=1e-6)
        cls = biofm.embed(ESM, seqs, pooling="cls", device="cpu")
        self.assertEqual(cls.shape, last.shape)
        self.assertFalse(np.allclose(cls, last))

    def test_dna_windows_match_the_cli(self):
        # Llama DNA model: sequences longer than a window, cut into overlapping windows whose
        # states are joined, exactly as `biofm embed --window N --stride S`.
        llama = os.path.join(SRC, "tests", "fixtures", "llama_tiny")
        names, seqs = fasta_records(os.path.join(SRC, "data", "dna_val.fasta"), 3)
        seqs = [s[:300] for s in seqs]
        got = biofm.embed(llama, seqs, device="cpu", window=64, stride=16)
        with tempfile.TemporaryDirectory() as d:
            fa = os.path.join(d, "in.fasta")
            with open(fa, "w") as f:
                for n, s in zip(names, seqs):
                    f.write(f">{n}\n{s}\n")
            out = os.path.join(d, "npy")
            subprocess.run([BINARY, "embed", "--model", llama, "--input", fa, "--device", "cpu", "--window", "64",
                            "--stride", "16", "--output", out, "--output-format", "npy"], check=True,
                           capture_output=True)
            want = np.load(os.path.join(out, "embeddings.npy"))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        truncated = biofm.embed(llama, seqs, device="cpu", max_seq_length=64)
        self.assertFalse(np.allclose(got, truncated))
        with self.assertRaises(ValueError):
            biofm.embed(llama, seqs, device="cpu", window=64, max_seq_length=64)
        for bad in (dict(window=-5), dict(window=64, stride=-3), dict(max_seq_length=-1)):
            with self.assertRaises(ValueError):
                biofm.embed(llama, seqs, device="cpu", **bad)

    def test_errors_are_value_errors_with_the_reason(self):
        with self.assertRaises(ValueError) as e:
            biofm.embed(os.path.join(SRC, "no_such_model"), ["MKT"], device="cpu")
        self.assertIn("no_such_model", str(e.exception))
        with self.assertRaises(ValueError):
            biofm.embed(ESM, ["MKT", ""], device="cpu")
        with self.assertRaises(ValueError):
            biofm.embed(ESM, ["MKT"], layers=99, device="cpu")
        with self.assertRaises(TypeError):
            biofm.embed(ESM, "MKT", device="cpu")


class MetricsTest(unittest.TestCase):
    def test_load_metrics_reads_records_and_counts_bad_lines(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "metrics.jsonl"), "w") as f:
                f.write('{"step": 1, "train/loss": 3.5}\n{"step": 2, "train/loss": 3.1}\n{"step": 3, "tra')
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                rows = biofm.load_metrics(d)
            self.assertEqual([r["step"] for r in rows], [1, 2])
            self.assertEqual(rows[1]["train/loss"], 3.1)
            self.assertEqual(len(w), 1)
            self.assertIn("1 line", str(w[0].message))


if __name__ == "__main__":
    unittest.main()
