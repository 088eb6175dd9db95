#!/usr/bin/env python3
"""The Parquet test fixture tests/fixtures/data/proteins_val_head.parquet: the first 50 records
of data/proteins_val.fasta as UniRef50's Parquet files hold them (a string column per field),
written with pyarrow in 3 row groups, plus one row whose sequence is null (read as an empty
record: skipped and counted).

    pip install pyarrow && python3 tools/make_parquet_fixture.py

Columns: `id` (string), `Sequence` (string; found by the default column name `sequence` in
another case), `length` (int64). tests/data/parquet_test.cpp reads it."""
import os

import pyarrow as pa
import pyarrow.parquet as pq

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main():
    names, seqs, cur = [], [], None
    with open(os.path.join(ROOT, "data", "proteins_val.fasta")) as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                if len(names) == 50:
                    break
                names.append(line[1:].split()[0])
                seqs.append("")
            else:
                seqs[-1] += line
    names.insert(10, "null_row")
    seqs.insert(10, None)
    table = pa.table({"id": names, "Sequence": seqs,
                      "length": [len(s) if s else 0 for s in seqs]})
    out = os.path.join(ROOT, "tests", "fixtures", "data", "proteins_val_head.parquet")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    pq.write_table(table, out, row_group_size=20)
    print("wrote", out, table.num_rows, "rows")


if __name__ == "__main__":
    main()
