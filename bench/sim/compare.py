#!/usr/bin/env python3
"""Measured against simulated: one row per workload, from `ragctl simulate --json` and one or more
`ragctl bench --json` runs of the same requests.

  bench/sim/compare.py NAME SIM.json REAL1.json[,REAL2.json,...] [NAME SIM.json REALS ...]

Per row: TTFT p50 and p99, throughput (finished requests / wall time), TPOT p50 and the hit rate
(prompt tokens reused / prompt tokens). Each cell: the real runs, the simulation, the simulation's
error against the real runs' mean (points for the hit rate) and the real runs' own spread (half
their range, relative to their mean). A mark (*) after the error means it misses the target
(TTFT p50 and req/s 10 %, TTFT p99 20 %, hit rate 2 points; TPOT has none). Markdown on stdout,
then how many rows meet each target.

  bench/sim/compare.py NAME DET.json,REP.json REAL1.json[,...] ...

With two simulations per row, the deterministic run (DET.json) and one with replications (REP.json:
`ragctl simulate --replications N`, its "replications" object), a second table: per metric the
real runs' mean, the deterministic run and its error, and the replications' median, its error and
their 10th-90th percentile range (`in` when the real mean lies inside it). The replications' median
is what the targets are counted on (a closed loop's tail depends on the phase between its clients,
which one deterministic run fixes at one arbitrary value); the deterministic run's count is given
beside it.
"""
import json
import statistics
import sys

TARGETS = {"p50": 10, "p99": 20, "rps": 10, "hit": 2}


def summary(path):
    d = json.load(open(path))
    r = d["runs"][0]
    ss = [s for s in r["samples"] if s.get("ok")]
    prompt = sum(s["usage"]["prompt_tokens"] for s in ss)
    reused = sum(sum(s["usage"]["reused_tokens"].values()) for s in ss)
    return {"p50": r["ttft_ms"]["p50"], "p99": r["ttft_ms"]["p99"], "rps": r["req_per_s"],
            "tpot": r["tpot_ms"]["p50"], "hit": 100.0 * reused / prompt if prompt else 0.0}


REP_KEYS = {"p50": "ttft_p50_ms", "p99": "ttft_p99_ms", "rps": "req_per_s", "tpot": "tpot_p50_ms", "hit": "hit_pct"}


def replicated(path):
    m = json.load(open(path))["replications"][0]["metrics"]
    return {k: m[v] for k, v in REP_KEYS.items()}, json.load(open(path))["replications"][0]["n"]


def err_of(k, sim, m):
    if k == "hit":
        return sim - m, abs(sim - m) <= TARGETS[k]
    e = 100 * (sim / m - 1) if m else 0.0
    return e, k not in TARGETS or abs(e) <= TARGETS[k]


def both(a):
    keys = [("p50", "%.1f"), ("p99", "%.1f"), ("rps", "%.2f"), ("hit", "%.1f")]
    n = None
    rows_out = []
    met = {"det": {k: 0 for k in TARGETS}, "rep": {k: 0 for k in TARGETS}}
    inside = {k: 0 for k in TARGETS}
    rows = 0
    for i in range(0, len(a), 3):
        name = a[i]
        det_path, rep_path = a[i + 1].split(",")
        det = summary(det_path)
        rep, n = replicated(rep_path)
        reals = [summary(p) for p in a[i + 2].split(",")]
        rows += 1
        cells = []
        for k, f in keys:
            m = statistics.mean(r[k] for r in reals)
            e1, ok1 = err_of(k, det[k], m)
            e2, ok2 = err_of(k, rep[k]["median"], m)
            met["det"][k] += ok1
            met["rep"][k] += ok2
            within = rep[k]["p10"] <= m <= rep[k]["p90"]
            inside[k] += within
            unit = "" if k == "hit" else " %"
            fe = "%+.1f" if k == "hit" else "%+.0f"
            cells.append((f % m) + " / " + (f % det[k]) + " (" + (fe % e1) + unit + ("" if ok1 else "*") + ") / " +
                         (f % rep[k]["median"]) + " (" + (fe % e2) + unit + ("" if ok2 else "*") + "; " +
                         (f % rep[k]["p10"]) + "-" + (f % rep[k]["p90"]) + (", in" if within else "") + ")")
        rows_out.append(f"| {name} | " + " | ".join(cells) + " |")
    print(f"| workload | TTFT p50 ms: real mean / deterministic (err) / median of {n} (err; p10-p90) | TTFT p99 ms | req/s | hit % (points) |")
    print("|---|---|---|---|---|")
    print("\n".join(rows_out))
    print()
    print(f"within target, median of {n} replications: " + ", ".join(f"{k} {met['rep'][k]}/{rows}" for k in TARGETS))
    print("within target, deterministic run: " + ", ".join(f"{k} {met['det'][k]}/{rows}" for k in TARGETS))
    print("real mean inside the replications' p10-p90: " + ", ".join(f"{k} {inside[k]}/{rows}" for k in TARGETS))


def main():
    a = sys.argv[1:]
    if a and "," in a[1]:
        return both(a)
    keys = [("p50", "%.1f"), ("p99", "%.1f"), ("rps", "%.2f"), ("tpot", "%.2f"), ("hit", "%.1f")]
    print("| workload | TTFT p50 ms real / sim (err; real spread) | TTFT p99 ms | req/s | TPOT p50 ms | hit % (points) |")
    print("|---|---|---|---|---|---|")
    met = {k: 0 for k in TARGETS}
    rows = 0
    for i in range(0, len(a), 3):
        name, sim, reals = a[i], summary(a[i + 1]), [summary(p) for p in a[i + 2].split(",")]
        rows += 1
        cells = []
        for k, f in keys:
            vals = [r[k] for r in reals]
            m = statistics.mean(vals)
            spread = (max(vals) - min(vals)) / 2
            if k == "hit":
                err = sim[k] - m
                ok = abs(err) <= TARGETS[k]
                cell = ", ".join(f % v for v in vals) + " / " + (f % sim[k]) + " (%+.1f%s; ±%.1f)" % (err, "" if ok else "*", spread)
            else:
                err = 100 * (sim[k] / m - 1) if m else 0.0
                ok = k not in TARGETS or abs(err) <= TARGETS[k]
                cell = ", ".join(f % v for v in vals) + " / " + (f % sim[k]) + " (%+.0f %%%s; ±%.0f %%)" % (
                    err, "" if ok else "*", 100 * spread / m if m else 0.0)
            if k in TARGETS and ok:
                met[k] += 1
            cells.append(cell)
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print("within target: " + ", ".join(f"{k} {met[k]}/{rows}" for k in TARGETS))


if __name__ == "__main__":
    main()
