#!/usr/bin/env python3
"""The adaptive benchmark's table (docs/benchmarks.md) from sweep.sh's output directory:
one row per load level and configuration, EM and TTFT mean / p50 / p99, throughput, choices.

  python3 bench/adapt/table.py /tmp/adapt [--levels 1 4 16]
"""
import argparse
import json
import os


def rows(path, label=None):
    with open(path) as f:
        d = json.load(f)
    for r in d["runs"]:
        name = label or r["reuse"].split("/", 1)[-1]
        yield name, r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--levels", nargs="+", default=["1", "4", "16"])
    a = ap.parse_args()
    target = open(os.path.join(a.out, "slo.txt")).read().strip()
    print("| clients | configuration | EM | TTFT mean | p50 | p99 | questions/s | choices |")
    print("|---:|---|---:|---:|---:|---:|---:|---|")
    for c in a.levels:
        runs = list(rows(os.path.join(a.out, f"c{c}.json")))
        for obj in ("balanced", "latency"):
            p = os.path.join(a.out, f"c{c}-slo-{obj}.json")
            if os.path.exists(p):
                runs += list(rows(p, f"adaptive, {obj}, SLO {target} ms"))
        for name, r in runs:
            if name == "auto":
                name = "adaptive (balanced, no SLO)"
            ch = r.get("adapt_choices", {})
            choices = ", ".join(f"{k} {v}" for k, v in sorted(ch.items())) if name.startswith("adaptive") else ""
            slo_mark = ""
            if ", SLO " in name:
                slo_mark = " ✓" if r["ttft_p99_ms"] <= float(target) else " ✗"
            print(f"| {c} | {name} | {100 * r['exact_match']:.1f} % | {r['ttft_mean_ms']:.1f} | {r['ttft_p50_ms']:.1f} | "
                  f"{r['ttft_p99_ms']:.1f}{slo_mark} | {r['questions_per_second']:.1f} | {choices} |")


if __name__ == "__main__":
    main()
