#!/usr/bin/env python3
"""Serving rates for `ragctl simulate` from one light-load measured run.

  bench/sim/calibrate.py PLAN.json BENCH_C1.json KV_BYTES_PER_TOKEN [MAX_BATCH_TOKENS [DENSE_MODEL]] > rates.json

DENSE_MODEL: roofline (default; a GPU) or additive (a CPU, where reading the weights and computing
do not overlap): how a step's dense part grows with its tokens (sim/include/ragd/sim/cost_model.h).

PLAN.json: `ragctl plan --model M --json` (the engine's kernel rates, measured here).
BENCH_C1.json: `ragctl bench --concurrency 1 --json` on the same daemon config (one request at a
time, so every step holds one request). Its first request (a cold daemon: page faults, first
allocations) is left out. Fitted over the others:
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
Everything else stays the kernel rates' (or the simulator's defaults).
"""
import json
import statistics
import sys


def main():
    plan = json.load(open(sys.argv[1]))
    bench = json.load(open(sys.argv[2]))
    bpt = float(sys.argv[3])
    budget = int(sys.argv[4]) if len(sys.argv) > 4 else 512
    dense_model = sys.argv[5] if len(sys.argv) > 5 else "roofline"
    if dense_model not in ("roofline", "additive"):
        sys.exit("DENSE_MODEL must be roofline or additive")
    rates = plan["rates"] if "rates" in plan else plan
    samples = [s for r in bench["runs"] for s in r["samples"][1:] if s.get("ok") and "timings" in s]
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
    out["source"] = "ragctl plan on this machine; serving fitted by bench/sim/calibrate.py on " + sys.argv[2]
    out["serving"] = {
        "retrieval_s": round(retrieval, 6),
        "network_s": round(network, 6),
        "step_overhead_s": round(step_overhead, 6),
        "admit_s": round(intercept, 6),
        "prefill_token_s": round(slope, 9),
        "dense_model": dense_model,
    }
    json.dump(out, sys.stdout, indent=1)
    print()
    print(f"# mean TPOT {itl * 1e3:.2f} ms, modelled decode {decode * 1e3:.2f} ms at {ctx:.0f} tokens; prefill residual "
          f"{intercept * 1e3:.2f} ms + {slope * 1e6:.1f} us/token over {len(xs)} requests", file=sys.stderr)


if __name__ == "__main__":
    main()
