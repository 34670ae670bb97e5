#!/usr/bin/env python3
"""Sums Nsight Compute's per-kernel durations by kernel, from `ncu --csv --print-units base
--metrics gpu__time_duration.sum` output (other lines, e.g. the program's own, are skipped), and
prints a Markdown table: launches, total and mean microseconds, share of the total; with --steps N
the total is also given per step.

    ncu --csv ... PROGRAM > ncu.csv; python3 scripts/gpu/kernel_times.py ncu.csv --steps 2
"""
import argparse
import collections
import csv
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--steps", type=int, default=1, help="decode steps the profile covers")
    a = ap.parse_args()
    with open(a.csv, newline="") as f:
        rows = [line for line in f if line.startswith('"')]
    total = collections.defaultdict(float)
    count = collections.Counter()
    header = None
    for r in csv.reader(rows):
        if header is None:
            header = {name: i for i, name in enumerate(r)}
            continue
        if r[header["Metric Name"]] != "gpu__time_duration.sum":
            continue
        name = r[header["Kernel Name"]].split("(")[0].strip()
        ns = float(r[header["Metric Value"]].replace(",", ""))
        unit = r[header["Metric Unit"]] if "Metric Unit" in header else "nsecond"
        scale = {"nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}.get(unit, 1.0)
        total[name] += ns * scale
        count[name] += 1
    if not total:
        sys.exit("kernel_times: no gpu__time_duration.sum rows in " + a.csv)
    grand = sum(total.values())
    print(f"| kernel | launches | total µs | mean µs | share |\n|---|---:|---:|---:|---:|")
    for name, ns in sorted(total.items(), key=lambda kv: -kv[1]):
        print(f"| `{name}` | {count[name]} | {ns / 1e3:.1f} | {ns / 1e3 / count[name]:.2f} | {100 * ns / grand:.1f} % |")
    print(f"\n{sum(count.values())} launches, {grand / 1e3:.1f} µs of kernel time"
          f" ({grand / 1e3 / a.steps:.1f} µs per step over {a.steps} steps)")


if __name__ == "__main__":
    main()
