#!/usr/bin/env python3
"""Checks biofm's TensorBoard event files with the `tensorboard` package's own reader.

    python3 tools/read_tfevents.py RUN_DIR/tensorboard [--expect-tag train/loss]

Reads every events.out.tfevents.* file through tensorboard's EventFileLoader (its record
reader verifies the length and payload CRC32Cs and stops at a bad one), prints the scalars per tag, and exits non-zero
if a file is damaged, lacks the leading `brain.Event:2` event, or an expected tag is missing.
Optional tool: the C++ tests check the files with their own reader and need no Python.
"""
import argparse
import glob
import os
import struct
import sys

try:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
except ImportError:
    sys.exit("read_tfevents.py needs the tensorboard package: python3 -m pip install tensorboard")


def count_records(path):
    """Records by their length fields alone (no CRC): what a complete read must return."""
    n, data, at = 0, open(path, "rb").read(), 0
    while at + 12 <= len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        at += 12 + length + 4
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", help="an event file or a directory holding them")
    ap.add_argument("--expect-tag", action="append", default=[], help="fail unless this tag has scalars")
    args = ap.parse_args()
    files = sorted(glob.glob(os.path.join(args.path, "events.out.tfevents.*"))) if os.path.isdir(args.path) else [args.path]
    if not files:
        sys.exit(f"no events.out.tfevents.* files in {args.path}")
    scalars = {}
    for f in files:
        events = list(EventFileLoader(f).Load())
        # The loader stops quietly at a bad CRC (it takes it for a file still being written).
        if len(events) != count_records(f):
            sys.exit(f"{f}: damaged: tensorboard read {len(events)} of {count_records(f)} records")
        if not events or events[0].file_version != "brain.Event:2":
            sys.exit(f"{f}: the first event is not file_version 'brain.Event:2'")
        for e in events[1:]:
            for v in e.summary.value:
                # EventFileLoader turns simple_value into a tensor proto (data-compat).
                value = v.simple_value if v.HasField("simple_value") else v.tensor.float_val[0]
                scalars.setdefault(v.tag, []).append((e.step, e.wall_time, value))
        print(f"{f}: {len(events)} events")
    for tag, points in sorted(scalars.items()):
        first, last = points[0], points[-1]
        print(f"  {tag}: {len(points)} points, step {first[0]} = {first[2]:.6g} ... step {last[0]} = {last[2]:.6g}")
    missing = [t for t in args.expect_tag if t not in scalars]
    if missing:
        sys.exit(f"missing tags: {', '.join(missing)}")


if __name__ == "__main__":
    main()
