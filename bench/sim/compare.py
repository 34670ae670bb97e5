#!/usr/bin/env python3
"""Measured against simulated: one row per pair of `ragctl bench --json` / `ragctl simulate --json`.

  bench/sim/compare.py NAME REAL.json SIM.json [NAME REAL.json SIM.json ...]

Per pair: TTFT p50 and p99, throughput (finished requests / wall time, tokens/s) and the hit rate
(prompt tokens reused / prompt tokens), measured, simulated and the relative error (points for the
hit rate). Markdown table on stdout.
"""
import json
import sys


def summary(path):
    d = json.load(open(path))
    r = d["runs"][0]
    ss = [s for s in r["samples"] if s.get("ok")]
    prompt = sum(s["usage"]["prompt_tokens"] for s in ss)
    reused = sum(sum(s["usage"]["reused_tokens"].values()) for s in ss)
    return {"p50": r["ttft_ms"]["p50"], "p99": r["ttft_ms"]["p99"], "rps": r["req_per_s"], "tps": r["tokens_per_s"],
            "tpot": r["tpot_ms"]["p50"], "hit": 100.0 * reused / prompt if prompt else 0.0}


def main():
    a = sys.argv[1:]
    print("| workload | TTFT p50 ms real / sim (err) | TTFT p99 ms real / sim (err) | req/s real / sim (err) "
          "| TPOT p50 ms real / sim (err) | hit % real / sim (points) |")
    print("|---|---|---|---|---|---|")
    for i in range(0, len(a), 3):
        name, real, sim = a[i], summary(a[i + 1]), summary(a[i + 2])
        cell = lambda k, f="%.1f": (f % real[k]) + " / " + (f % sim[k]) + " (%+.0f %%)" % (100 * (sim[k] / real[k] - 1))
        print(f"| {name} | {cell('p50')} | {cell('p99')} | {cell('rps', '%.2f')} | {cell('tpot', '%.2f')} | "
              f"{real['hit']:.1f} / {sim['hit']:.1f} ({sim['hit'] - real['hit']:+.1f}) |")


if __name__ == "__main__":
    main()
