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
import os

from . import _core

__version__ = _core.__version__
BiofmError = _core.BiofmError  # a ValueError carrying biofm's message

atexit.register(_core._release_device)


def embed(model_dir, sequences, layers=-1, pooling="mean", device="auto", precision=None,
          max_tokens=None, max_seq_length=None, window=None, stride=None):
    """Pooled hidden states of `sequences` (a list of str) from a Hugging Face model directory
    (ESM-2 or a Llama DNA model).

    layers: an int (0 = the embedding output, L = the final normed states, negative from the end)
        or a list of them; pooling: "mean" (residues only, special tokens excluded), "cls" or
        "last"; device: "auto" (the GPU when there is one), "cpu", "cuda" or "cuda:N";
        precision: None (bf16 on the GPU, fp32 on the CPU), "bf16", "fp8" (GPU) or "fp32";
        max_seq_length: tokens per sequence, special tokens included (longer ones are truncated;
        default min(1024, the model's context)); max_tokens: tokens per batch;
        window: cut longer sequences into windows of this many tokens instead, overlapping by
        `stride` bases (default min(200, half the window)), their states joined as `biofm embed
        --window` does. DNA (Llama) models use windows at the model's context by default unless
        max_seq_length is given.

    Returns a float32 array [len(sequences), hidden] for one layer, or a dict {layer: array}
    (layers resolved to 0..L) for a list.
    """
    if isinstance(sequences, str):
        raise TypeError("sequences must be a list of strings, not one string")
    single = isinstance(layers, int)
    wanted = [layers] if single else list(layers)
    arrays = _core.embed(os.fspath(model_dir), list(sequences), ",".join(str(int(k)) for k in wanted), pooling,
                         device, precision or "", int(max_tokens or 0), int(max_seq_length or 0),
                         int(window or 0), -1 if stride is None else int(stride))
    # (layer indices as the engine resolved them: negatives counted from the end)
    return arrays[0][1] if single else dict(arrays)


def load_metrics(run_dir):
    """The records of a training run's metrics.jsonl (a run directory or the file itself), as a
    list of dicts in file order: step, loss, learning rate, throughput, ... as `biofm train`
    wrote them. A line that is not JSON (a run killed mid-write) is skipped and counted in a
    warning, never silently dropped."""
    path = os.fspath(run_dir)
    if os.path.isdir(path):
        path = os.path.join(path, "metrics.jsonl")
    rows, bad = [], 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                bad += 1
    if bad:
        import warnings
        warnings.warn(f"{path}: {bad} line(s) are not JSON and were skipped")
    return rows


__all__ = ["embed", "load_metrics", "BiofmError", "__version__"]
