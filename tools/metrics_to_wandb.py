#!/usr/bin/env python3
"""Turns a biofm run's metrics.jsonl into an offline Weights & Biases run, for `wandb sync`.

    python3 -m pip install wandb pyyaml
    python3 metrics_to_wandb.py RUN_DIR [--project biofm] [--name NAME]
    wandb sync RUN_DIR/wandb/offline-run-*      # later, on a machine that can reach W&B

(In the source tree it is tools/metrics_to_wandb.py; `cmake --install` puts it in
PREFIX/share/biofm/tools/.)

Logs each record at its `step` and at its own time: the record's `wall_time` (else its
`timestamp`, ISO-8601 UTC) becomes W&B's `_timestamp`, so W&B's "Wall Time" axis shows when
training logged, not when this ran. (W&B computes `_runtime`, the "Relative Time" axis, itself
from the run's start, which wandb.init sets to the conversion's time, as of wandb 0.31: plot
against Wall Time or step.) Every other numeric key is logged once: where a record carries both
biofm's name and the BioNeMo recipes' name of one figure (`loss` and `train/loss`, `lr` and
`train/learning_rate`, `val_loss` and `val/loss`, ...), only the recipes' name is kept. The run's
config.yaml becomes the W&B config. A resumed run's repeated steps are logged once (W&B steps must
not go back), and a last line cut short by a kill is skipped. Nothing is sent: the run is written
in offline mode under RUN_DIR/wandb/.
"""
import argparse
import datetime
import json
import os
import sys

# biofm's names and the recipes' names of the same figure, as src/biofm/train/metrics.cpp
# (with_standard_keys) writes both into each record.
RECIPE_NAMES = {
    "loss": "train/loss",
    "perplexity": "train/perplexity",
    "lr": "train/learning_rate",
    "grad_norm": "train/grad_norm",
    "step_time": "train/step_time",
    "unpadded_tokens_per_sec": "train/unpadded_tokens_per_second_per_gpu",
    "tokens_per_sec": "train/tokens_per_second_per_gpu",
    "unpadded_tokens_per_step": "train/total_unpadded_tokens_per_batch",
    "mfu_seed": "train/mfu",
    "gpu_mem_peak_gib": "train/gpu_memory_peak_gib",
    "gpu_mem_allocated_max_gib": "train/gpu_memory_allocated_max_gb",
    "gpu_mem_allocated_mean_gib": "train/gpu_memory_allocated_mean_gb",
    "gpu_sm_clock_mhz": "gpu/sm_clock_mhz",
    "gpu_power_w": "gpu/power_w",
    "gpu_temperature_c": "gpu/temperature_c",
    "gpu_power_capped_fraction": "gpu/power_capped_fraction",
    "val_loss": "val/loss",
    "val_perplexity": "val/perplexity",
    "val_accuracy": "val/accuracy",
}


def record_time(r):
    """Seconds since the epoch at which a record was logged: its wall_time, else its timestamp."""
    t = r.get("wall_time")
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        return float(t)
    stamp = r.get("timestamp")
    if isinstance(stamp, str):
        try:
            return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return None


def wandb_rows(records):
    """(step, values) per record to log, in order: numeric keys once each (the recipes' name where
    both are present), `_timestamp` from the record's time, no step that goes back."""
    rows = []
    last_step = -1
    for r in records:
        step = int(r.get("step", last_step + 1))
        values = {k: v for k, v in r.items()
                  if isinstance(v, (int, float)) and not isinstance(v, bool)
                  and k not in ("step", "wall_time") and RECIPE_NAMES.get(k) not in r}
        # W&B steps must not decrease: a resumed run's repeated steps are logged once.
        if step < last_step or not values:
            continue
        t = record_time(r)
        if t is not None:
            values["_timestamp"] = t
        rows.append((step, values))
        last_step = step
    return rows


def read_records(path, name):
    with open(path) as f:
        lines = f.read().split("\n")
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n == len(lines):  # the last line, without its newline: cut short by a kill (as biofm report skips it)
                print(f"note: {name}:{n}: skipped the last line, cut short", file=sys.stderr)
                continue
            sys.exit(f"{name}:{n}: {e}")
    return records


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir", help="a biofm output_dir (metrics.jsonl, config.yaml)")
    ap.add_argument("--metrics", help="metrics file inside RUN_DIR (default: the run's logger.metrics_file, "
                    "else metrics.jsonl)")
    ap.add_argument("--project", default="biofm")
    ap.add_argument("--name", help="run name (default: the directory's name)")
    args = ap.parse_args(argv)
    try:
        import wandb
    except ImportError:
        sys.exit("metrics_to_wandb.py needs the wandb package: python3 -m pip install wandb")

    run_dir = os.path.abspath(args.run_dir)
    config = {}
    cfg_path = os.path.join(run_dir, "config.yaml")
    if os.path.exists(cfg_path):
        import yaml
        with open(cfg_path) as f:
            config = yaml.safe_load(f) or {}
    metrics = args.metrics or (config.get("logger") or {}).get("metrics_file") or "metrics.jsonl"
    rows = wandb_rows(read_records(os.path.join(run_dir, metrics), metrics))

    run = wandb.init(project=args.project, name=args.name or os.path.basename(run_dir), dir=run_dir,
                     mode="offline", config=config)
    for step, values in rows:
        run.log(values, step=step)
    run.finish()
    print(f"offline run written: {run.dir.rsplit('/files', 1)[0]}")
    print(f"upload it with: wandb sync {os.path.dirname(run.dir.rsplit('/files', 1)[0])}/offline-run-*")


if __name__ == "__main__":
    main()
