"""The Python package (python/biofm) against the `biofm` binary: the same embeddings as
`biofm embed` writes (same engine, same defaults), layer selection, errors, warnings (the engine's
notes among them), Ctrl-C, load_metrics."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
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
        with self.assertWarnsRegex(biofm.BiofmWarning, "3 of 3 sequences were truncated to 64 tokens"):
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

    def test_argument_errors_in_python_terms_before_the_model_loads(self):
        # A model directory whose config.json is fine but whose weights are not: an argument
        # error must be reported before loading (which would fail), naming the Python argument.
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.path.join(ESM, "config.json"), d)
            with open(os.path.join(d, "model.safetensors"), "wb") as f:
                f.write(b"not weights")
            with self.assertRaises(ValueError) as e:
                biofm.embed(d, ["MKT"], device="cpu")
            self.assertIn("model.safetensors", str(e.exception))
            for kwargs, want in ((dict(layers=[]), "layers is empty"),
                                 (dict(layers=99), "layers: layer 99 does not exist"),
                                 (dict(pooling="max"), "pooling must be 'mean', 'cls' or 'last', got 'max'"),
                                 (dict(precision="bf16"), "precision='bf16' needs a GPU"),
                                 (dict(precision="fp16"), "precision must be None, 'bf16', 'fp8' or 'fp32'"),
                                 (dict(device="gpu"), "device must be 'auto', 'cpu', 'cuda' or 'cuda:N'"),
                                 (dict(window=64, max_seq_length=64), "window and max_seq_length exclude")):
                with self.subTest(**kwargs):
                    with self.assertRaises(ValueError) as e:
                        biofm.embed(d, ["MKT"], **{"device": "cpu", **kwargs})
                    self.assertIn(want, str(e.exception))
                    self.assertNotIn("--", str(e.exception))

    def test_layer_and_sequence_types(self):
        seqs = ["MKTAYIAKQRQISFVKSHFSRQ", "MSEQNNTEMT"]
        one = biofm.embed(ESM, seqs, layers=1, device="cpu")
        np.testing.assert_array_equal(biofm.embed(ESM, seqs, layers=np.int64(1), device="cpu"), one)
        by_layer = biofm.embed(ESM, seqs, layers=np.array([1, 0]), device="cpu")
        self.assertEqual(sorted(by_layer), [0, 1])
        np.testing.assert_array_equal(by_layer[1], one)
        for bad, name in ((1.5, "float"), ("1", "str"), (True, "bool"), ([0, 1.0], "float")):
            with self.subTest(layers=bad):
                with self.assertRaises(TypeError) as e:
                    biofm.embed(ESM, seqs, layers=bad, device="cpu")
                self.assertIn("layers", str(e.exception))
                self.assertIn(name, str(e.exception))
        for bad, where in (([1], "sequences[0] is int"), (["MKT", b"MKT"], "sequences[1] is bytes"),
                           (["MKT", None], "sequences[1] is NoneType")):
            with self.subTest(sequences=bad):
                with self.assertRaises(TypeError) as e:
                    biofm.embed(ESM, bad, device="cpu")
                self.assertIn(where, str(e.exception))
        with self.assertRaises(TypeError) as e:
            biofm.embed(ESM, seqs, pooling=None, device="cpu")
        self.assertIn("pooling must be a str", str(e.exception))
        # Sizes are whole numbers (1.5 tokens is not 1); numpy integers are fine.
        np.testing.assert_array_equal(biofm.embed(ESM, seqs, layers=1, max_tokens=np.int32(512), device="cpu"), one)
        for key in ("max_tokens", "max_seq_length", "window", "stride"):
            with self.subTest(size=key):
                with self.assertRaises(TypeError) as e:
                    biofm.embed(ESM, seqs, device="cpu", **{key: 64.5})
                self.assertIn(key, str(e.exception))

    def test_truncation_and_unknown_residues_warn(self):
        # As `biofm embed` reports them: one sequence over 1024 tokens, one residue (J) that the
        # ESM vocabulary does not have.
        # (The fixture, as transformers saves ESM-2, has a contact head: kept for exports, it is
        # not noted at a load; test_model_notes_are_warnings_not_stderr.)
        seqs = ["M" + "ACDEFGHIKLMNPQRSTVWY" * 100, "MKTZZBXUO.-JMKT"]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            emb, stats = biofm.embed(ESM, seqs, device="cpu", return_stats=True)
        self.assertEqual(emb.shape[0], 2)
        messages = [str(x.message) for x in w]
        self.assertEqual(len(w), 2, messages)
        for x in w:
            self.assertTrue(issubclass(x.category, biofm.BiofmWarning))
            self.assertTrue(issubclass(x.category, UserWarning))
            self.assertEqual(x.filename, __file__)  # (stacklevel: the caller's line)
        self.assertIn("1 of 2 sequences were truncated to 1024 tokens", messages[0])
        self.assertIn("1 residue(s) are not in the model's vocabulary", messages[1])
        self.assertEqual((stats["sequences"], stats["truncated"], stats["unknown"]), (2, 1, 1))
        self.assertEqual((stats["max_seq_length"], stats["window"]), (1024, 0))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            _, stats = biofm.embed(ESM, seqs, device="cpu", window=1024, stride=8, return_stats=True)
        self.assertEqual([str(x.message) for x in w if "truncated" in str(x.message)], [])
        self.assertEqual((stats["truncated"], stats["windows"], stats["window"]), (0, 3, 1024))
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a clean input warns about nothing (the contact head neither)
            biofm.embed(ESM, ["MKTAYIAKQR"], device="cpu")
            biofm.embed(os.path.join(SRC, "tests", "fixtures", "llama_tiny"), ["ACGT" * 20], device="cpu")

    def test_model_notes_are_warnings_not_stderr(self):
        # A directory as transformers saves an EsmForMaskedLM holds tensors that are not loaded
        # (rotary buffers; the contact head, kept for exports, is not noted): `biofm embed` says
        # so in a "note: DIR: ..." line on
        # stderr; the package gives the same text as a BiofmWarning and prints nothing (checked
        # in a child: the engine would write to file descriptor 2, not sys.stderr).
        mlm = os.path.join(SRC, "tests", "fixtures", "hf_dirs", "esm2_mlm")
        with tempfile.TemporaryDirectory() as d:
            fa = os.path.join(d, "in.fasta")
            with open(fa, "w") as f:
                f.write(">a\nMKTAYIAKQR\n")
            cli = subprocess.run([BINARY, "embed", "--model", mlm, "--input", fa, "--device", "cpu", "--output",
                                  os.path.join(d, "npy"), "--output-format", "npy"], check=True,
                                 capture_output=True, text=True)
        notes = [line[len("note: "):] for line in cli.stderr.splitlines() if line.startswith("note: ")]
        self.assertEqual(len(notes), 1, cli.stderr)
        self.assertEqual(mlm + ": ignored 1 rotary inv_freq tensor", notes[0])
        child = (
            "import json, warnings, biofm\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            f"    biofm.embed({mlm!r}, ['MKTAYIAKQR'], device='cpu')\n"
            "print(json.dumps([[x.category.__name__, str(x.message), x.filename] for x in w]))\n"
            "warnings.simplefilter('ignore', biofm.BiofmWarning)\n"
            f"biofm.embed({mlm!r}, ['MKTAYIAKQR'], device='cpu')\n")  # (silenced: no output at all)
        r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertEqual(json.loads(r.stdout), [["BiofmWarning", notes[0], "<string>"]])
        # In this process too: pytest.warns / assertWarns catch it, at the caller's line.
        with self.assertWarnsRegex(biofm.BiofmWarning, "ignored 1 rotary inv_freq tensor") as cm:
            biofm.embed(mlm, ["MKTAYIAKQR"], device="cpu")
        self.assertEqual(cm.filename, __file__)

    def test_ctrl_c_stops_a_long_embed(self):
        # A child embeds far more than it could in the time allowed (minutes of work on one
        # core); SIGINT once it is under way must raise KeyboardInterrupt out of embed within
        # about a batch, and leave the module usable.
        child = (
            "import signal, biofm\n"
            # (Python's own handler, even when this test runs where SIGINT is ignored: `cmd &`)
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            f"esm = {ESM!r}\n"
            "seqs = ['M' + 'ACDEFGHIKLMNPQRSTVWY' * 50] * 3000\n"
            "print('embedding', flush=True)\n"
            "try:\n"
            "    biofm.embed(esm, seqs, device='cpu', max_tokens=2048)\n"
            "    print('finished', flush=True)\n"
            "except KeyboardInterrupt:\n"
            "    print('KeyboardInterrupt', flush=True)\n"
            "print('then', biofm.embed(esm, ['MKT'], device='cpu').shape, flush=True)\n")
        with subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) as p:
            try:
                self.assertEqual(p.stdout.readline().strip(), "embedding")
                time.sleep(1.0)  # (into the model's batches)
                p.send_signal(signal.SIGINT)
                try:
                    out, err = p.communicate(timeout=8)
                except subprocess.TimeoutExpired:
                    self.fail("embed did not stop within 8 s of SIGINT")
            finally:
                if p.poll() is None:
                    p.kill()
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(out.split("\n")[:2], ["KeyboardInterrupt", "then (1, 64)"], err)


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

    def test_load_metrics_skips_lines_that_are_not_objects(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "metrics.jsonl")
            with open(path, "w") as f:
                f.write('{"step": 1}\n[1, 2]\n"str"\n3\nnull\n{"step": 2}\n')
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                rows = biofm.load_metrics(path)
            self.assertEqual(rows, [{"step": 1}, {"step": 2}])
            self.assertEqual(len(w), 1)
            self.assertTrue(issubclass(w[0].category, biofm.BiofmWarning))
            self.assertIn("4 line(s) are not JSON objects", str(w[0].message))
            self.assertEqual(w[0].filename, __file__)  # (stacklevel: the caller's line)
            # A file that is not JSON lines at all (here: binary) gives no records, and says so.
            binary = os.path.join(d, "model.bin")
            with open(binary, "wb") as f:
                f.write(bytes(range(256)) * 8 + b"\n12\n" + bytes(range(256)))
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                self.assertEqual(biofm.load_metrics(binary), [])
            self.assertEqual(len(w), 1)
            self.assertIn("not JSON objects", str(w[0].message))

    def test_load_metrics_follows_the_runs_metrics_file(self):
        # A run directory's config.yaml (as `biofm train` writes it: --print-config prints the
        # same text) names the metrics file (logger.metrics_file, relative to the run).
        def config_yaml(metrics_file):
            return subprocess.run([BINARY, "train", "--config-name", "esm2_sanity", "--config-dir",
                                   os.path.join(SRC, "configs"), "--print-config",
                                   f"logger.metrics_file={metrics_file}"],
                                  check=True, capture_output=True, text=True).stdout

        for name in ("custom.jsonl", "my metrics.jsonl", 'q"uote.jsonl'):
            with self.subTest(name=name), tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "config.yaml"), "w") as f:
                    f.write(config_yaml(name))
                with open(os.path.join(d, name), "w") as f:
                    f.write('{"step": 7}\n')
                with open(os.path.join(d, "metrics.jsonl"), "w") as f:
                    f.write('{"step": 1}\n')  # (not this run's file)
                self.assertEqual(biofm.load_metrics(d), [{"step": 7}])
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "config.yaml"), "w") as f:
                f.write(config_yaml(""))
            with self.assertRaises(FileNotFoundError) as e:
                biofm.load_metrics(d)
            self.assertIn("metrics_file is empty", str(e.exception))


if __name__ == "__main__":
    unittest.main()
