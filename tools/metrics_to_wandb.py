#!/usr/bin/env python3
"""Turns a biofm run's metrics.jsonl into an offline Weights & Biases run, for `wandb sync`.

    python3 -m pip install wandb pyyaml
    python3 tools/metrics_to_wandb.py RUN_DIR [--project biofm] [--name NAME]
    wandb sync RUN_DIR/wandb/offline-run-*      # later, on a machine that can reach W&B

Logs every numeric key of each record at its `step` (the recipes' names train/loss,
val/loss, ... included) and the run's config.yaml as the W&B config. Nothing is sent: the run
is written in offline mode under RUN_DIR/wandb/.
"""
import argparse
import json
import os
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", help="a biofm output_dir (metrics.jsonl, config.yaml)")
    ap.add_argument("--metrics", help="metrics file inside RUN_DIR (default: the run's logger.metrics_file, "
                    "else metrics.jsonl)")
    ap.add_argument("--project", default="biofm")
    ap.add_argument("--name", help="run name (default: the directory's name)")
    args = ap.parse_args()
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
    with open(os.path.join(run_dir, metrics)) as f:
        lines = f.read().split("\n")
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as e:
            if n == len(lines):  # the last line, without its newline: cut short by a kill (as biofm report skips it)
                print(f"note: {metrics}:{n}: skipped the last line, cut short", file=sys.stderr)
                continue
            sys.exit(f"{metrics}:{n}: {e}")

    run = wandb.init(project=args.project, name=args.name or os.path.basename(run_dir), dir=run_dir,
                     mode="offline", config=config)
    last_step = -1
    for r in records:
        step = int(r.get("step", last_step + 1))
        values = {k: v for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
        # W&B steps must not decrease: a resumed run's repeated steps are logged once.
        if step < last_step or not values:
            continue
        wandb.log(values, step=step)
        last_step = step
    run.finish()
    print(f"offline run written: {run.dir.rsplit('/files', 1)[0]}")
    print(f"upload it with: wandb sync {os.path.dirname(run.dir.rsplit('/files', 1)[0])}/offline-run-*")


if __name__ == "__main__":
    main()
