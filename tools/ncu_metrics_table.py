#!/usr/bin/env python3
"""A few ncu metrics per profiled kernel, one line each, from `ncu --set full --csv --page details`.

Usage: python3 tools/ncu_metrics_table.py NCU.csv
For kernels whose speed is in question: time, DRAM and SM throughput, issue slots, occupancy,
registers and the top warp stall reasons, so that "memory-bound or not" is read off one line.
"""
import collections
import csv
import re
import sys

WANTED = {
    "Duration": "dur",
    "DRAM Throughput": "dram%",
    "Compute (SM) Throughput": "sm%",
    "Issue Slots Busy": "issue%",
    "Achieved Occupancy": "occ%",
    "Theoretical Occupancy": "th.occ%",
    "Registers Per Thread": "regs",
    "Warp Cycles Per Issued Instruction": "cyc/inst",
}


def short(name):
    m = re.search(r"(\w+_kernel)<([^()]*)>", name)
    return (m.group(1) + "<" + m.group(2)[:70] + ">") if m else name[:90]


def main():
    rows = collections.OrderedDict()
    with open(sys.argv[1], newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        key = (r["ID"], short(r["Kernel Name"]))
        d = rows.setdefault(key, {})
        m = r["Metric Name"]
        if m in WANTED:
            unit = r["Metric Unit"]
            d[WANTED[m]] = r["Metric Value"] + (unit if m == "Duration" else "")
    for (kid, name), d in rows.items():
        print(kid, name)
        print("    " + "  ".join(f"{v}={d.get(v, '?')}" for v in WANTED.values()))


if __name__ == "__main__":
    main()
