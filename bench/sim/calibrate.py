#!/usr/bin/env python3
"""Serving rates for `ragctl simulate` from light-load measured runs.

  bench/sim/calibrate.py PLAN.json BENCH_C1.json KV_BYTES_PER_TOKEN [MAX_BATCH_TOKENS [DENSE_MODEL]]
      [--publish MISS_C1.json --publish-sim "SIMULATE ARGS"] [--wake OPEN.json --wake-sim "SIMULATE ARGS"]
      > rates.json

DENSE_MODEL: roofline (default; a GPU) or additive (a CPU, where reading the weights and computing
do not overlap): how a step's dense part grows with its tokens (sim/include/ragd/sim/cost_model.h).

PLAN.json: `ragctl plan --model M --json` (the engine's kernel rates, measured here).
BENCH_C1.json: `ragctl bench --concurrency 1 --json` on the same daemon config (one request at a
time, so every step holds one request), or several, comma-separated (e.g. a mostly-hit run and a
mostly-miss run without reuse, so that the prefill line spans short and long prefills and no
publication is in it). Each one's first request (a cold daemon: page faults, first allocations) is
left out. Fitted over the others:
  retrieval_s      median of the daemon's timings.retrieval_ms
  network_s        half the median of (client TTFT - daemon timings.ttft_ms)
  step_overhead_s  mean time per output token after the first ((e2e - TTFT) / (tokens - 1)) - the
                   modelled decode step (decode_dense_s + KV streaming)
  admit_s, prefill_token_s
                   least squares of (measured prefill_ms - the modelled prefill steps) on the prompt
                   tokens each request computed: what a serving prefill costs beyond the kernel
                   rates, per request and per token
Means, not medians: throughput and queueing follow the mean service time, and on a shared machine
the mean carries the background load a run pays.
  publish_s_per_byte (with --publish) engine time lost per byte of a published node's lower-tier
                   copy (sim/include/ragd/sim/cost_model.h): MISS_C1.json is a one-client run of a
                   mostly-miss workload (or several runs of it, comma-separated) (every miss publishes its documents' KV); the value is found
                   by bisection so that `ragctl SIMULATE_ARGS --rates R` (the same requests, e.g.
                   --workload calib-miss.txt --retrieved calib-miss.retrieved.jsonl --set
                   concurrency=1) gives the measured mean end-to-end time, first request left out
                   on both sides. Everything else is fixed first, from BENCH_C1.json.
Everything else stays the kernel rates' (or the simulator's defaults).
"""
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile


def mean_of(path, key):
    """Mean `key` (e2e_ms, ttft_ms) of a bench / simulate JSON's first run, first request left out."""
    r = json.load(open(path))["runs"][0]
    return statistics.mean(s[key] for s in r["samples"][1:] if s.get("ok"))


def fit(out, field, runs, simulate, key, hi):
    """serving[field] by bisection so that the simulated mean `key` of `simulate` matches the runs
    (comma-separated: the mean of their means); monotone in the field."""
    want = statistics.mean(mean_of(p, key) for p in runs.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        rates, res = os.path.join(tmp, "rates.json"), os.path.join(tmp, "sim.json")

        def sim(x):
            out["serving"][field] = x
            json.dump(out, open(rates, "w"))
            subprocess.run(simulate + ["--rates", rates, "--json", res], check=True, capture_output=True)
            return mean_of(res, key)

        lo = 0.0
        if sim(lo) >= want:
            return 0.0, want, sim(lo)
        for _ in range(12):  # up to 4^12 times the first guess
            if sim(hi) >= want:
                break
            lo, hi = hi, hi * 4
        for _ in range(30):
            mid = (lo + hi) / 2
            if sim(mid) < want:
                lo = mid
            else:
                hi = mid
        x = (lo + hi) / 2
        return x, want, sim(x)


def take(argv, flag):
    if flag not in argv:
        return argv, None
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:], argv[i + 1]


def main():
    argv = sys.argv
    argv, miss = take(argv, "--publish")
    argv, publish_sim = take(argv, "--publish-sim")
    argv, wake = take(argv, "--wake")
    argv, wake_sim = take(argv, "--wake-sim")
    if (miss is None) != (publish_sim is None) or (wake is None) != (wake_sim is None):
        sys.exit("--publish needs --publish-sim and --wake needs --wake-sim")
    plan = json.load(open(argv[1]))
    benches = [json.load(open(p)) for p in argv[2].split(",")]
    bpt = float(argv[3])
    budget = int(argv[4]) if len(argv) > 4 else 512
    dense_model = argv[5] if len(argv) > 5 else "roofline"
    if dense_model not in ("roofline", "additive"):
        sys.exit("DENSE_MODEL must be roofline or additive")
    rates = plan["rates"] if "rates" in plan else plan
    samples = [s for b in benches for r in b["runs"] for s in r["samples"][1:] if s.get("ok") and "timings" in s]
    retrieval = statistics.median(s["timings"]["retrieval_ms"] for s in samples) / 1e3
    network = max(0.0, statistics.median(s["ttft_ms"] - s["timings"]["ttft_ms"] for s in samples) / 2e3)
    ctx = statistics.mean(s["usage"]["prompt_tokens"] + s["tokens"] / 2 for s in samples)
    itl = statistics.mean((s["e2e_ms"] - s["ttft_ms"]) / (s["tokens"] - 1) for s in samples if s["tokens"] > 1) / 1e3
    decode = rates["decode_dense_s"] + ctx * bpt / rates["kv_read_bytes_per_s"]
    step_overhead = max(0.0, itl - decode)

    def modelled_prefill(prompt, reused):  # the simulator's steps for one request alone
        t, start = 0.0, min(reused, prompt - 1)
        while start < prompt:
            n = min(budget, prompt - start)
            pairs = n * start + n * (n + 1) / 2
            if dense_model == "additive":
                dense = rates["decode_dense_s"] + (n - 1) / rates["dense_tokens_per_s"]
            else:
                dense = max(rates["decode_dense_s"], n / rates["dense_tokens_per_s"])
            t += step_overhead + dense + pairs / rates["attn_pairs_per_s"]
            start += n
        return t

    xs, ys = [], []
    for s in samples:
        p, r = s["usage"]["prompt_tokens"], sum(s["usage"]["reused_tokens"].values())
        xs.append(p - min(r, p - 1))
        ys.append(s["timings"]["prefill_ms"] / 1e3 - modelled_prefill(p, r))
    mx, my = statistics.mean(xs), statistics.mean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = max(0.0, sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx) if sxx > 0 else 0.0
    intercept = max(0.0, my - slope * mx)
    out = dict(rates)
    out["source"] = "ragctl plan on this machine; serving fitted by bench/sim/calibrate.py on " + ", ".join(
        p for p in [argv[2], miss, wake] if p)
    out["serving"] = {
        "retrieval_s": round(retrieval, 6),
        "network_s": round(network, 6),
        "step_overhead_s": round(step_overhead, 6),
        "admit_s": round(intercept, 6),
        "prefill_token_s": round(slope, 9),
        "dense_model": dense_model,
    }
    note = ""
    if miss:
        x, want, got = fit(out, "publish_s_per_byte", miss, shlex.split(publish_sim), "e2e_ms", 1e-8)
        out["serving"]["publish_s_per_byte"] = float("%.4g" % x)
        note += f"; publication {x * 1e9:.3f} ns/byte (mean e2e {want:.1f} ms measured, {got:.1f} ms simulated)"
    if wake:
        x, want, got = fit(out, "wake_s", wake, shlex.split(wake_sim), "ttft_ms", 1e-3)
        out["serving"]["wake_s"] = round(x, 6)
        note += f"; wake-up {x * 1e3:.2f} ms (mean TTFT {want:.1f} ms measured, {got:.1f} ms simulated)"
    json.dump(out, sys.stdout, indent=1)
    print()
    print(f"# mean TPOT {itl * 1e3:.2f} ms, modelled decode {decode * 1e3:.2f} ms at {ctx:.0f} tokens; prefill residual "
          f"{intercept * 1e3:.2f} ms + {slope * 1e6:.1f} us/token over {len(xs)} requests{note}", file=sys.stderr)


if __name__ == "__main__":
    main()
