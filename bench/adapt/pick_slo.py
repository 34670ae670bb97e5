#!/usr/bin/env python3
"""Picks the adaptive pipeline's TTFT target from runs on the FIT questions only.

Input: the cheapest candidate forced at the highest load level (--cheap JSON of `ragctl eval --json`)
and the policy with each target of a grid at that level (--runs SLO=JSON ...), all on the fit set.
Rule (fixed before any run): the smallest target that the policy held on the fit questions (TTFT
p99 <= target) with exact match at least --min-gain points above the cheapest candidate's. The
held-out questions play no part: they are only run afterwards, once, with the target chosen here.

Prints a table and the chosen target; writes it to --out. When no target of the grid
qualifies: the largest target of the grid is written then, and the report says so."""
import argparse
import json
import sys


def summary(path):
    with open(path) as f:
        d = json.load(f)
    r = d["runs"][0]
    if d.get("failures"):
        raise SystemExit(f"{path}: {d['failures']} failed questions")
    return r["exact_match"] * 100, r["ttft_p99_ms"], r["ttft_p50_ms"], r.get("adapt_choices", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cheap", required=True, help="eval JSON: the cheapest candidate forced, fit set, top level")
    ap.add_argument("--runs", nargs="+", required=True, help="SLO_MS=eval JSON of the policy with that target")
    ap.add_argument("--min-gain", type=float, default=1.0, help="EM points above the cheapest (default 1)")
    ap.add_argument("--out", required=True, help="file to write the chosen target (ms) to")
    a = ap.parse_args()
    cheap_em, cheap_p99, cheap_p50, _ = summary(a.cheap)
    print(f"cheapest forced (fit set): EM {cheap_em:.1f} %  TTFT p50 {cheap_p50:.1f}  p99 {cheap_p99:.1f} ms")
    print(f"{'target ms':>10} {'EM':>7} {'p50 ms':>8} {'p99 ms':>8}  held  gain  choices")
    chosen = None
    largest = None
    for spec in sorted(a.runs, key=lambda s: float(s.split("=", 1)[0])):
        slo_s, path = spec.split("=", 1)
        slo = float(slo_s)
        em, p99, p50, choices = summary(path)
        held = p99 <= slo
        gain = em >= cheap_em + a.min_gain
        ch = " ".join(f"{k} {v}" for k, v in sorted(choices.items()))
        print(f"{slo:>10.0f} {em:>6.1f}% {p50:>8.1f} {p99:>8.1f}  {'yes' if held else 'no ':>4}  {'yes' if gain else 'no ':>4}  {ch}")
        if chosen is None and held and gain:
            chosen = slo
        largest = slo
    if chosen is None:
        print(f"no target of the grid was held with the required quality gain: using the largest, {largest:.0f} ms")
        chosen = largest
    else:
        print(f"chosen target: {chosen:.0f} ms (smallest held on the fit set with EM >= cheapest + {a.min_gain:g})")
    with open(a.out, "w") as f:
        f.write(f"{chosen:.0f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
