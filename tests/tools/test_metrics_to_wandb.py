"""tools/metrics_to_wandb.py: each record logged at its own time, each figure under one name, the
name table in step with the one train writes (src/biofm/train/metrics.cpp)."""
import glob
import importlib.util
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import types
import unittest
from unittest import mock

SRC = os.environ.get("BIOFM_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(SRC, "tools"))
import metrics_to_wandb as m2w  # noqa: E402

# Two records as train writes them (with_standard_keys: both names, timestamp, wall_time), then a
# resume from step 10 that logs step 15 again.
RECORDS = [
    {"step": 10, "loss": 3.0, "train/loss": 3.0, "lr": 1e-3, "train/learning_rate": 1e-3,
     "train/global_step": 10, "timestamp": "2026-01-01T00:00:00.000Z", "wall_time": 1767225600.0},
    {"step": 20, "loss": 2.5, "train/loss": 2.5, "val_loss": 2.7, "val/loss": 2.7,
     "train/global_step": 20, "timestamp": "2026-01-01T00:01:30.500Z", "wall_time": 1767225690.5},
    {"step": 15, "loss": 2.4, "train/loss": 2.4, "timestamp": "2026-01-01T00:02:00.000Z",
     "wall_time": 1767225720.0},
]


class WandbRows(unittest.TestCase):
    def test_each_figure_once_under_the_recipes_name_at_the_records_time(self):
        rows = m2w.wandb_rows(RECORDS)
        self.assertEqual([s for s, _ in rows], [10, 20])  # W&B steps do not go back
        self.assertEqual(rows[0][1], {"train/loss": 3.0, "train/learning_rate": 1e-3, "train/global_step": 10,
                                      "_timestamp": 1767225600.0})
        self.assertEqual(rows[1][1], {"train/loss": 2.5, "val/loss": 2.7, "train/global_step": 20,
                                      "_timestamp": 1767225690.5})

    def test_the_timestamp_when_there_is_no_wall_time_and_legacy_names_alone_are_kept(self):
        rows = m2w.wandb_rows([{"step": 1, "loss": 4.0, "timestamp": "2026-01-01T00:00:00.000Z"},
                               {"step": 2, "loss": 3.0, "timestamp": "2026-01-01T00:00:02.250Z"},
                               {"step": 3, "loss": 2.0}])
        self.assertEqual(rows[0][1], {"loss": 4.0, "_timestamp": 1767225600.0})
        self.assertEqual(rows[1][1], {"loss": 3.0, "_timestamp": 1767225602.25})
        self.assertEqual(rows[2][1], {"loss": 2.0})  # no time: W&B's own

    def test_the_name_table_is_the_one_train_writes(self):
        with open(os.path.join(SRC, "src", "biofm", "train", "metrics.cpp")) as f:
            cpp = f.read()
        table = cpp[cpp.index("kRecipeNames[] = {"):]
        table = table[:table.index("};")]
        self.assertEqual(dict(re.findall(r'\{"([^"]+)", "([^"]+)"\}', table)), m2w.RECIPE_NAMES)


class Main(unittest.TestCase):
    def test_logs_the_rows_into_an_offline_run(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "metrics.jsonl"), "w") as f:
                f.write("".join(json.dumps(r) + "\n" for r in RECORDS) + '{"step": 30, "lo')
            run = mock.MagicMock(dir=os.path.join(d, "wandb", "offline-run-x", "files"))
            fake = types.SimpleNamespace(init=mock.MagicMock(return_value=run))
            with mock.patch.dict(sys.modules, {"wandb": fake}):
                m2w.main([d])
            self.assertEqual(fake.init.call_args.kwargs["mode"], "offline")
            self.assertEqual(fake.init.call_args.kwargs["name"], os.path.basename(d))
            self.assertEqual([c.args[0] for c in run.log.call_args_list], [v for _, v in m2w.wandb_rows(RECORDS)])
            self.assertEqual([c.kwargs["step"] for c in run.log.call_args_list], [10, 20])
            run.finish.assert_called_once()

    @unittest.skipUnless(importlib.util.find_spec("wandb"), "wandb is not installed")
    def test_the_offline_run_has_the_records_times_and_one_name_per_figure(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "metrics.jsonl"), "w") as f:
                f.write("".join(json.dumps(r) + "\n" for r in RECORDS))
            # (as a user runs it: wandb writes the run's file out by the time its process exits)
            subprocess.run([sys.executable, m2w.__file__, d], check=True, capture_output=True,
                           env=dict(os.environ, WANDB_SILENT="true"))
            (path,) = glob.glob(os.path.join(d, "wandb", "offline-run-*", "run-*.wandb"))
            history = offline_history(path)
        self.assertEqual([h["_step"] for h in history], [10, 20])
        self.assertEqual([h["_timestamp"] for h in history], [1767225600.0, 1767225690.5])
        self.assertEqual(history[1]["train/loss"], 2.5)
        self.assertEqual(history[1]["val/loss"], 2.7)
        for h in history:
            self.assertFalse({"loss", "lr", "val_loss", "wall_time"} & h.keys(), h)


def offline_history(path):
    """The history rows of an offline run's .wandb file (a LevelDB-style log of protobuf records:
    a 7-byte file header, 32 KiB blocks, each chunk with a 7-byte header: CRC, length, type)."""
    from wandb.proto import wandb_internal_pb2 as pb
    with open(path, "rb") as f:
        data = f.read()
    pos, block, buf, rows = 7, 32768, b"", []
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, n, kind = struct.unpack("<IHB", data[pos:pos + 7])
        buf += data[pos + 7:pos + 7 + n]
        pos += 7 + n
        if kind in (1, 4):  # a whole record, or a record's last chunk
            record = pb.Record()
            record.ParseFromString(buf)
            buf = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item})
    return rows

if __name__ == "__main__":
    unittest.main()
