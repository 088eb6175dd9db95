"""biofm from Python: embeddings of sequences as NumPy arrays, and a run's metrics.

    import biofm
    emb = biofm.embed("esm2_t6_8M_UR50D/", ["MKTAYIAKQR", "MSEQNNTEMT"])   # float32 [2, hidden]
    by_layer = biofm.embed(model_dir, seqs, layers=[0, -1])              # {0: array, 6: array}
    rows = biofm.load_metrics("runs/esm2")                               # list of dicts

The work is done by the same C++ engine as the `biofm` command (`biofm embed` for files, shards,
per-token states and resumable runs: docs/INFERENCE.md).
"""
import atexit
import json
import numbers
import os
import warnings

from . import _core

__version__ = _core.__version__
BiofmError = _core.BiofmError  # a ValueError carrying biofm's message


class BiofmWarning(UserWarning):
    """What biofm reports without failing: notes about a model directory (what `biofm` prints as
    "note: ..."), truncated sequences, unknown residues, skipped lines."""


atexit.register(_core._release_device)


def _layer(value, name):
    # Any integral type (int, numpy.int64, ...), but not bool, float or str.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return int(value)


def _count(value, name, unset):
    # A size argument: None (the default, passed as `unset`) or an integral value (1.5 is not 1).
    return unset if value is None else _layer(value, name)


def embed(model_dir, sequences, layers=-1, pooling="mean", device="auto", precision=None,
          max_tokens=None, max_seq_length=None, window=None, stride=None, return_stats=False):
    """Pooled hidden states of `sequences` (a list of str) from a Hugging Face model directory
    (ESM-2 or a Llama DNA model).

    layers: an int (0 = the embedding output, L = the final normed states, negative from the end)
        or a list of them; pooling: "mean" (residues only, special tokens excluded), "cls" or
        "last" (the first / last token; with windows, the first window's first / the last window's
        last, which has seen that window only); device: "auto" (the GPU when there is one), "cpu",
        "cuda" or "cuda:N";
        precision: None (bf16 on the GPU, fp32 on the CPU), "bf16", "fp8" (GPU) or "fp32";
        max_seq_length: tokens per sequence, special tokens included (longer ones are truncated;
        default min(1024, the model's context)); max_tokens: tokens per batch;
        window: cut longer sequences into windows of this many tokens instead, overlapping by
        `stride` bases (default min(200, half the window)), their states joined as `biofm embed
        --window` does. DNA (Llama) models use windows at the model's context by default unless
        max_seq_length is given.

    Returns a float32 array [len(sequences), hidden] for one layer, or a dict {layer: array}
    (layers resolved to 0..L) for a list. The engine's notes about the model directory (tensors
    it holds that are not loaded, such as rotary buffers), truncated sequences and residues
    outside the model's vocabulary (embedded as <unk>) are reported with a BiofmWarning, never on
    stderr (warnings.simplefilter("ignore", biofm.BiofmWarning) silences them);
    return_stats=True returns (result, stats) with their counts: a dict with "sequences",
    "truncated", "unknown", "windows", "tokens" (fed to the model), "max_seq_length" (0 with
    windows) and "window" (0 without).

    Ctrl-C (KeyboardInterrupt) stops the computation after the batch in progress.
    """
    if isinstance(sequences, (str, bytes)):
        raise TypeError("sequences must be a list of strings, not one string")
    sequences = list(sequences)
    for i, s in enumerate(sequences):
        if not isinstance(s, str):
            raise TypeError(f"sequences[{i}] is {type(s).__name__}, not str")
    for name, value in (("pooling", pooling), ("device", device), ("precision", precision or "")):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    single = isinstance(layers, numbers.Integral)
    if single:
        wanted = [_layer(layers, "layers")]
    elif isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise TypeError(f"layers must be an int or a list of ints, not {type(layers).__name__}")
    else:
        wanted = [_layer(k, f"layers[{i}]") for i, k in enumerate(layers)]
    arrays, stats, notes = _core.embed(os.fspath(model_dir), sequences, wanted, pooling, device, precision or "",
                                       _count(max_tokens, "max_tokens", 0), _count(max_seq_length, "max_seq_length", 0),
                                       _count(window, "window", 0), _count(stride, "stride", -1))
    # What `biofm embed` reports, as warnings pointing at the caller's line: the engine's notes
    # (which the CLI prints as "note: ..." lines: tensors of the model directory that were not
    # loaded, ...), then the counts.
    for text in notes:
        warnings.warn(text, BiofmWarning, stacklevel=2)
    if stats["truncated"]:
        warnings.warn(f"{stats['truncated']} of {stats['sequences']} sequences were truncated to "
                      f"{stats['max_seq_length']} tokens (max_seq_length; window=N cuts them into windows "
                      "instead)", BiofmWarning, stacklevel=2)
    if stats["unknown"]:
        warnings.warn(f"{stats['unknown']} residue(s) are not in the model's vocabulary and were embedded as "
                      "<unk>", BiofmWarning, stacklevel=2)
    # (layer indices as the engine resolved them: negatives counted from the end)
    result = arrays[0][1] if single else dict(arrays)
    return (result, stats) if return_stats else result


def _metrics_file(run_dir):
    """The metrics file a run directory's config.yaml names (logger: metrics_file:, relative to
    the run directory), else metrics.jsonl. A line scan of the YAML biofm writes (the package
    needs no YAML parser): the first `metrics_file:` indented under the top-level `logger:`."""
    name = "metrics.jsonl"
    config = os.path.join(run_dir, "config.yaml")
    if os.path.isfile(config):
        in_logger = False
        with open(config, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line[:1] not in (" ", "\t", "\n", ""):  # a top-level key
                    in_logger = line.rstrip() == "logger:"
                elif in_logger and line.strip().startswith("metrics_file:"):
                    value = line.strip()[len("metrics_file:"):].strip()
                    if value.startswith('"'):
                        value = json.loads(value)  # (YAML's double-quoted strings escape as JSON)
                    elif value.startswith("'"):
                        value = value[1:-1].replace("''", "'")
                    if not value:
                        raise FileNotFoundError(f"{config}: logger.metrics_file is empty: the run wrote no metrics")
                    name = value
                    break
    return os.path.join(run_dir, name)  # (an absolute name stays as it is)


def load_metrics(run_dir):
    """The records of a training run's metrics file (a run directory or the file itself), as a
    list of dicts in file order: step, loss, learning rate, throughput, ... as `biofm train`
    wrote them. For a directory, the file its config.yaml names (logger.metrics_file), else
    metrics.jsonl. A line that is not a JSON object (a run killed mid-write) is skipped and
    counted in a BiofmWarning, never silently dropped."""
    path = os.fspath(run_dir)
    if os.path.isdir(path):
        path = _metrics_file(path)
    rows, bad = [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except (json.JSONDecodeError, RecursionError):  # (RecursionError: "[[[[..." nested too deep)
                row = None
            if isinstance(row, dict):
                rows.append(row)
            else:
                bad += 1
    if bad:
        warnings.warn(f"{path}: {bad} line(s) are not JSON objects and were skipped", BiofmWarning, stacklevel=2)
    return rows


__all__ = ["embed", "load_metrics", "BiofmError", "BiofmWarning", "__version__"]
