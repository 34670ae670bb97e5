#!/usr/bin/env python3
"""Serving rates for `ragctl simulate` from light-load measured runs.

  bench/sim/calibrate.py PLAN.json BENCH_C1.json KV_BYTES_PER_TOKEN [MAX_BATCH_TOKENS [DENSE_MODEL]]
      [--steps STEPS.json] [--publish MISS_C1.json --publish-sim "SIMULATE ARGS"]
      [--wake OPEN.json --wake-sim "SIMULATE ARGS"] [--rows CN.json --rows-sim "SIMULATE ARGS"]
      [--check CN.json --check-sim "SIMULATE ARGS"]
      [--wake-after SECONDS] [--wake-tokens N] [--wake-constant]
      [--report REPORT.json] [--source TEXT]
      > rates.json

DENSE_MODEL: roofline (default; a GPU), additive (a CPU, where reading the weights and computing
do not overlap) or measured (needs --steps): how a step's dense part grows with its tokens
(sim/include/ragd/sim/cost_model.h).

--steps STEPS.json (`ragctl simulate-steps --model M --json STEPS.json`: batched engine steps of
serving shapes, timed in one process on the daemon's engine code, no daemon) gives the engine part
of a step instead of interpolating between plan's two points:
  dense_curve      the single prefills of n tokens without logits, less their causal attention at
                   plan's attention rate (made non-decreasing)
  sample_s         per sampled row (the LM head's row and its logits): the decode batches of k
                   sequences less dense_curve(k) and their KV reads, least squares per row
  prefill_context_s per cached token behind a prefill item (its KV is read from memory): what the
                   prefills after C cached tokens with their row take beyond the terms above
The idle gaps' cost is printed (the kernels' threads sleep; after long gaps the whole process is
cold), not used: the daemon's HTTP and retrieval threads run just before each step.
The LM head's weights are read once per step that samples (the intercept of the decode batches):
that is in step_overhead_s (every decode step samples). The mixed shapes (decodes beside a
prefill) are not fitted: their measured times against the model's are printed as a check. With
--steps the one-client fit below compares the client's TTFT (not the daemon's forward time, which
leaves out the scheduler's work around a step) with the modelled retrieval, network and prefill
steps, and takes means of the retrieval and network times (see below).
  wake_quantiles   (with --steps) the per-request time of the line above, drawn per request (not
                   a constant): what a request that finds the replica idle loses beyond its steps,
                   paid by a step after the replica idled wake_after_s (--wake-after, default
                   0.0005: between back-to-back steps and one client's gap between requests); a
                   request batched into running steps does not pay it. admit_s is 0. Its
                   distribution: each one-client cache hit's own time beyond the line's slope
                   (TTFT - network - retrieval - steps x TPOT - slope x (engine - steps x decode), the
                   hits: at most --wake-tokens computed tokens, default 64, one step), less its own
                   client side beyond the mean (network_quantiles draws that spread already), 21
                   quantiles (every 5 %), shifted so that their mean is the line's intercept (the
                   mean over every request). Only the hits: a long prefill's point also carries the
                   engine's speed on that run (a few % of 100+ ms), which is no per-request time.
                   --wake-constant writes the intercept as the constant wake_s instead.
  engine_slowdown  (with --steps) the line's slope less 1: the engine terms in the daemon against
                   simulate-steps alone; step_overhead_s is TPOT less the slowed decode step.
  --run-speed-sd S written as serving.run_speed_sd (ragctl calibrate measures it over its repeated
                   runs: the machine's run-to-run speed, drawn once per replica by a seeded simulation)
  --rows CN.json   (with --steps, --rows-sim "SIMULATE ARGS") the serving work per streamed row, from
                   runs with several clients (e.g. the mostly-hit requests from 4 clients): a step of
                   k sequences streams k tokens, and their HTTP write and a co-located client's read
                   take the engine's cores. By bisection, so that the simulated mean TPOT matches
                   theirs; moved from step_overhead_s to sample_s, so that one client's decode step
                   (one row) stays as fitted.
  --wake OPEN.json, --check CN.json (with --steps) runs compared, not fitted: the simulated mean
                   TTFT of `ragctl SIMULATE_ARGS` against theirs (e.g. the mostly-hit requests at
                   2 req/s and from 4 clients).

PLAN.json: `ragctl plan --model M --json` (the engine's kernel rates, measured here).
BENCH_C1.json: `ragctl bench --concurrency 1 --json` on the same daemon config (one request at a
time, so every step holds one request), or several, comma-separated (e.g. a mostly-hit run and a
mostly-miss run without reuse, so that the prefill line spans short and long prefills and no
publication is in it). Each one's first request (a cold daemon: page faults, first allocations) is
left out. Fitted over the others:
  retrieval_s      median of the daemon's timings.retrieval_ms (the mean with --steps)
  network_s        half the median of (client TTFT - daemon timings.ttft_ms) (the mean with --steps)
  network_quantiles (with --steps) the distribution of that difference, 21 quantiles (every 5 %):
                   drawn per request by a seeded simulation (`ragctl simulate --replications N`),
                   half on the way in and half on the way back; an unseeded one uses network_s
  step_noise_quantiles (with --steps) the engine's own noise: each one-client request of at least
                   256 tokens that reused nothing (the misses without reuse), its daemon prefill_ms
                   against a least-squares line over its computed tokens, as a relative deviation;
                   21 quantiles shifted to mean 0 (the mean is engine_slowdown's). A seeded
                   simulation draws one per step (the deviations of a request's steps taken as
                   moving together, as a drifting machine speed does)
  step_overhead_s  mean time per output token after the first ((e2e - TTFT) / (tokens - 1)) - the
                   modelled decode step (decode_dense_s + KV streaming)
  admit_s, prefill_token_s (without --steps)
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
  wake_s           (without --steps, with --wake) by bisection so that `ragctl WAKE_SIM_ARGS`
                   gives the mean TTFT of OPEN.json (the mostly-hit requests at 2 req/s)
Everything else stays the kernel rates' (or the simulator's defaults).

--report REPORT.json writes what the fit found, for a caller that checks it (`ragctl calibrate`):
  "line"      the one-client least-squares line (requests, intercept_s, slope, the residuals' root mean
              square and largest absolute value in seconds, with the terms as used, clamps applied)
  "checks"    each measured mean against the simulated one: "publish", "rows" (fitted by bisection:
              how close the bisection got), "wake", "check" (not fitted)
  "step_checks" the mixed engine steps against the model (with --steps)
  "warnings"  the clamps, as in "fit_warnings"
--source TEXT replaces the output's "source" string (default: the files it was fitted on).
"""
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile


# Fitted terms that cannot be negative are clamped at 0; a clamp that changes a value is reported
# (on stderr and in the output's "fit_warnings") with the raw value, since it means the model does
# not describe this machine's measurements there.
FIT_WARNINGS = []
# What --report writes (see above).
REPORT = {"checks": [], "warnings": FIT_WARNINGS}


def at_least_zero(name, raw):
    # A term fitted twice (step_overhead_s: before and after the engine slowdown) keeps its last clamp.
    FIT_WARNINGS[:] = [w for w in FIT_WARNINGS if w["term"] != name]
    if raw < 0:
        FIT_WARNINGS.append({"term": name, "raw": raw, "used": 0.0})
        print(f"calibrate.py: warning: {name} fitted as {raw:.6g}, clamped to 0", file=sys.stderr)
        return 0.0
    return raw


def mean_of(path, key):
    """Mean `key` (e2e_ms, ttft_ms, or tpot_ms: (e2e - TTFT) / (tokens - 1)) of a bench / simulate
    JSON's first run, first request left out."""
    r = json.load(open(path))["runs"][0]
    ok = [s for s in r["samples"][1:] if s.get("ok")]
    if key == "tpot_ms":
        return statistics.mean((s["e2e_ms"] - s["ttft_ms"]) / (s["tokens"] - 1) for s in ok if s["tokens"] > 1)
    return statistics.mean(s[key] for s in ok)


def fit(out, field, runs, simulate, key, hi):
    """serving[field] by bisection so that the simulated mean `key` of `simulate` matches the runs
    (comma-separated: the mean of their means); monotone in the field. `field` is a serving key, or
    a function that sets the rates for a value."""
    want = statistics.mean(mean_of(p, key) for p in runs.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        rates, res = os.path.join(tmp, "rates.json"), os.path.join(tmp, "sim.json")

        def sim(x):
            if callable(field):
                field(x)
            else:
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


def check(out, runs, simulate, key):
    """The measured mean `key` of the runs and the simulated one with the rates as they are."""
    want = statistics.mean(mean_of(p, key) for p in runs.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        rates, res = os.path.join(tmp, "rates.json"), os.path.join(tmp, "sim.json")
        json.dump(out, open(rates, "w"))
        subprocess.run(simulate + ["--rates", rates, "--json", res], check=True, capture_output=True)
        return want, mean_of(res, key)


def quantiles(v, n=21):
    """n values of the piecewise-linear inverse distribution function of v at 0, 1/(n-1), .., 1."""
    v = sorted(v)

    def at(p):
        k = p * (len(v) - 1)
        i = min(int(k), len(v) - 2)
        return v[i] + (v[i + 1] - v[i]) * (k - i)
    return [at(i / (n - 1)) for i in range(n)]


def network_quantiles(samples):
    """Client TTFT less the daemon's (seconds), 21 quantiles: the per-request network noise."""
    return [round(max(0.0, q) / 1e3, 7) for q in quantiles([s["ttft_ms"] - s["timings"]["ttft_ms"] for s in samples])]


def step_noise_quantiles(samples, min_tokens=256):
    """The misses' (nothing reused) prefill time against a line over their tokens, relative, 21 quantiles
    shifted to mean 0: the engine's noise per step (None with fewer than 10 such requests)."""
    pts = []
    for s in samples:
        p, r = s["usage"]["prompt_tokens"], sum(s["usage"]["reused_tokens"].values())
        if r == 0 and p >= min_tokens:
            pts.append((p - r, s["timings"]["prefill_ms"]))
    if len(pts) < 10:
        return None
    mx = statistics.mean(x for x, _ in pts)
    my = statistics.mean(y for _, y in pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    b = sum((x - mx) * (y - my) for x, y in pts) / sxx if sxx > 0 else 0.0
    rel = [y / (my + b * (x - mx)) - 1 for x, y in pts]
    q = quantiles(rel)
    mean_q = sum(q[i] + q[i + 1] for i in range(len(q) - 1)) / (2 * (len(q) - 1))
    return [round(v - mean_q, 5) for v in q]


def one_client_samples(benches):
    """The one-client runs' finished requests with timings, each run's first (cold) request left out."""
    return [s for b in benches for r in b["runs"] for s in r["samples"][1:] if s.get("ok") and "timings" in s]


def take(argv, flag):
    if flag not in argv:
        return argv, None
    i = argv.index(flag)
    return argv[:i] + argv[i + 2:], argv[i + 1]


def step_rates(steps_path, rates, bpt):
    """The engine part of a step from `ragctl simulate-steps` timings (see above), and the check rows."""
    d = json.load(open(steps_path))
    ctx, steps = d["context"], d["steps"]
    attn = lambda start, n: (n * start + n * (n + 1) / 2) / rates["attn_pairs_per_s"]
    kv = lambda c: c * bpt / rates["kv_read_bytes_per_s"]
    curve = []
    for s in sorted((s for s in steps if s["decodes"] == 0 and s["start"] == 0 and not s["logits"]), key=lambda s: s["prefill"]):
        v = max(s["seconds"] - attn(0, s["prefill"]), curve[-1][1] if curve else 1e-9)
        curve.append([s["prefill"], float("%.5g" % v)])
    pts = dict(curve)
    ks = sorted(pts)

    def dense(t):
        if t <= ks[0]:
            return pts[ks[0]]
        if t >= ks[-1]:
            return pts[ks[-1]] + (t - ks[-1]) / rates["dense_tokens_per_s"]
        hi = next(k for k in ks if k >= t)
        lo = max(k for k in ks if k < t)
        return pts[lo] + (pts[hi] - pts[lo]) * (t - lo) / (hi - lo)

    # Decode batches: decode(k) - dense(k) - k kv(ctx + 1) = logits_step + k * sample_s (least
    # squares): the LM head's weights are read once per step that samples, each row adds a little.
    dec = [(s["decodes"], s["seconds"] - dense(s["decodes"]) - s["decodes"] * kv(ctx + 1))
           for s in steps if s["prefill"] == 0 and s["decodes"] > 0]
    mk, my = statistics.mean(k for k, _ in dec), statistics.mean(y for _, y in dec)
    sample = at_least_zero("sample_s", sum((k - mk) * (y - my) for k, y in dec) / sum((k - mk) ** 2 for k, _ in dec))
    logits_step = at_least_zero("logits_step_s", my - sample * mk)
    # A prefill after ctx cached tokens with its row: what is left over the model above, per cached token.
    hits = [s for s in steps if s["decodes"] == 0 and s["start"] > 0 and s["logits"]]
    left = [s["seconds"] - (dense(s["prefill"]) + attn(s["start"], s["prefill"]) + logits_step + sample) for s in hits]
    context = at_least_zero("context_s_per_token", sum(left) / sum(s["start"] for s in hits)) if hits else 0.0

    def model(s):
        m = dense(s["decodes"] + s["prefill"]) + s["decodes"] * (kv(ctx + 1) + sample) + logits_step
        if s["prefill"]:
            m += attn(s["start"], s["prefill"]) + context * s["start"] + sample
        return m

    checks = [(s["decodes"], s["prefill"], s["start"], s["seconds"], model(s)) for s in steps if s["logits"]]
    # Wake-up: the same step after the engine idled for gap_s, less the step back to back.
    idle = sorted((i["gap_s"], i["seconds"]) for i in d.get("idle", []))
    wake = None
    if idle and idle[0][0] == 0:
        base = idle[0][1]
        extra = [(g, t - base) for g, t in idle[1:]]
        top = max(e for _, e in extra)
        after = next(g for g, e in extra if e >= top / 2)  # the first gap that pays at least half the most
        cost = statistics.median(e for g, e in extra if g >= after)
        wake = (after, max(0.0, cost), extra)
    return curve, sample, logits_step, context, dense, checks, wake


def main():
    argv = sys.argv
    argv, steps_path = take(argv, "--steps")
    argv, miss = take(argv, "--publish")
    argv, publish_sim = take(argv, "--publish-sim")
    argv, wake = take(argv, "--wake")
    argv, wake_sim = take(argv, "--wake-sim")
    argv, split = take(argv, "--check")
    argv, split_sim = take(argv, "--check-sim")
    argv, rows = take(argv, "--rows")
    argv, rows_sim = take(argv, "--rows-sim")
    argv, wake_after = take(argv, "--wake-after")
    argv, wake_tokens = take(argv, "--wake-tokens")
    argv, report_path = take(argv, "--report")
    argv, source_text = take(argv, "--source")
    argv, run_speed_sd = take(argv, "--run-speed-sd")
    wake_constant = "--wake-constant" in argv
    wake_open = "--wake-open" in argv
    argv = [a for a in argv if a not in ("--wake-constant", "--wake-open")]
    if wake_open and (wake is None or steps_path is None or wake_constant):
        sys.exit("--wake-open needs --wake and --steps, and not --wake-constant")
    if (split is None) != (split_sim is None):
        sys.exit("--check needs --check-sim")
    if (miss is None) != (publish_sim is None) or (wake is None) != (wake_sim is None):
        sys.exit("--publish needs --publish-sim and --wake needs --wake-sim")
    if (rows is None) != (rows_sim is None) or (rows is not None and steps_path is None):
        sys.exit("--rows needs --rows-sim and --steps")
    if len(argv) < 4:
        sys.exit(__doc__)
    plan = json.load(open(argv[1]))
    benches = [json.load(open(p)) for p in argv[2].split(",")]
    bpt = float(argv[3])
    budget = int(argv[4]) if len(argv) > 4 else 512
    dense_model = argv[5] if len(argv) > 5 else "roofline"
    if dense_model not in ("roofline", "additive", "measured"):
        sys.exit("DENSE_MODEL must be roofline, additive or measured")
    if (dense_model == "measured") != (steps_path is not None):
        sys.exit("DENSE_MODEL measured needs --steps, and --steps needs DENSE_MODEL measured")
    rates = plan["rates"] if "rates" in plan else plan
    sample = 0.0
    if steps_path:
        curve, sample, logits_step, context, dense_measured, checks, wake_steps = step_rates(steps_path, rates, bpt)
        print(f"# steps: LM head {logits_step * 1e3:.3f} ms per sampling step + {sample * 1e3:.3f} ms per row; "
              f"{context * 1e6:.3f} us per cached token behind a prefill", file=sys.stderr)
        REPORT["step_checks"] = [{"decodes": k, "prefill": n, "start": start, "measured_s": got, "model_s": want}
                                 for k, n, start, got, want in checks]
        for k, n, start, got, want in checks:
            print(f"# step check: {k} decodes + {n}-token prefill after {start}: measured {got * 1e3:.2f} ms, "
                  f"model {want * 1e3:.2f} ms ({(want / got - 1) * 100:+.0f} %)", file=sys.stderr)
        if wake_steps:
            print("# idle gap -> extra step time: " + ", ".join(f"{g * 1e3:g} ms {e * 1e3:+.2f}" for g, e in wake_steps[2]),
                  file=sys.stderr)
    samples = one_client_samples(benches)
    # With --steps, means: the client's side and the HTTP threads (rare delays of several ms) and the
    # retrieval threads work beside the engine, so their tails lengthen a request's path, not the
    # engine's steps; a median would leave them to the per-request overhead fitted below, which
    # the simulator charges inside a step.
    typical = statistics.mean if steps_path else statistics.median
    retrieval = typical(s["timings"]["retrieval_ms"] for s in samples) / 1e3
    network = at_least_zero("network_s", typical(s["ttft_ms"] - s["timings"]["ttft_ms"] for s in samples) / 2e3)
    ctx = statistics.mean(s["usage"]["prompt_tokens"] + s["tokens"] / 2 for s in samples)
    itl = statistics.mean((s["e2e_ms"] - s["ttft_ms"]) / (s["tokens"] - 1) for s in samples if s["tokens"] > 1) / 1e3
    if steps_path:
        decode = dense_measured(1) + sample + ctx * bpt / rates["kv_read_bytes_per_s"]
    else:
        decode = rates["decode_dense_s"] + ctx * bpt / rates["kv_read_bytes_per_s"]
    step_overhead = at_least_zero("step_overhead_s", itl - decode)

    def modelled_prefill(prompt, reused):  # the simulator's steps for one request alone
        t, start = 0.0, min(reused, prompt - 1)
        while start < prompt:
            n = min(budget, prompt - start)
            pairs = n * start + n * (n + 1) / 2
            if dense_model == "measured":
                dense = dense_measured(n) + (sample if start + n >= prompt else 0.0)
            elif dense_model == "additive":
                dense = rates["decode_dense_s"] + (n - 1) / rates["dense_tokens_per_s"]
            else:
                dense = max(rates["decode_dense_s"], n / rates["dense_tokens_per_s"])
            t += step_overhead + dense + pairs / rates["attn_pairs_per_s"]
            if dense_model == "measured":
                t += context * start
            start += n
        return t

    # With --steps, one client's requests (apart by the network both ways and the retrieval) must
    # find the replica idle for longer than the wake-up threshold: the fit below takes their time
    # beyond the steps for the wake-up.
    wake_after_s = float(wake_after) if wake_after else 0.0005
    if steps_path and 2 * network + retrieval <= wake_after_s:
        sys.exit(f"one client's gap {(2 * network + retrieval) * 1e3:.2f} ms is within the wake-up threshold "
                 f"{wake_after_s * 1e3:g} ms (--wake-after)")

    slowdown = 0.0
    if steps_path:
        # One-client TTFT = network both ways + retrieval + per-request time + its steps, each
        # step_overhead_s + (1 + slowdown) * engine; and the mean time per output token = step_overhead_s
        # + (1 + slowdown) * the decode step's engine part. So TTFT - network - retrieval - steps * TPOT
        # = per-request time + (1 + slowdown) * (engine - steps * decode): a least-squares line.
        def engine_steps(prompt, reused):
            e, n, start = 0.0, 0, min(reused, prompt - 1)
            while start < prompt:
                k = min(budget, prompt - start)
                e += dense_measured(k) + (sample if start + k >= prompt else 0.0) + context * start
                e += (k * start + k * (k + 1) / 2) / rates["attn_pairs_per_s"]
                start, n = start + k, n + 1
            return e, n

        xs, ys = [], []
        for s in samples:
            p, r = s["usage"]["prompt_tokens"], sum(s["usage"]["reused_tokens"].values())
            e, n = engine_steps(p, r)
            xs.append(e - n * decode)
            ys.append(s["ttft_ms"] / 1e3 - 2 * network - retrieval - n * itl)
        mx, my = statistics.mean(xs), statistics.mean(ys)
        g = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        slowdown = at_least_zero("engine_slowdown", g - 1)
        intercept = at_least_zero("per_request_intercept_s", my - (1 + slowdown) * mx)
        hit_tokens = int(wake_tokens or 64)

        def hits_beyond_line(requests):
            """Each cache hit's (at most hit_tokens computed, one step) time beyond the line's slope,
            sorted: its point on the line less the slope's part, from the daemon's TTFT rather than the
            client's. A seeded simulation draws the client side from network_quantiles, so its
            spread left in here would count twice."""
            own = []
            for s in requests:
                p, r = s["usage"]["prompt_tokens"], sum(s["usage"]["reused_tokens"].values())
                if p - min(r, p - 1) > hit_tokens:
                    continue
                e, n = engine_steps(p, r)
                own.append(s["timings"]["ttft_ms"] / 1e3 - retrieval - n * itl - (1 + slowdown) * (e - n * decode))
            return sorted(own)

        def quantile(v, p):
            k = p * (len(v) - 1)
            i = min(int(k), len(v) - 2)
            return v[i] + (v[i + 1] - v[i]) * (k - i)

        if wake_open:
            # The open-loop runs' hits: each finds the replica idle after a real idle gap (one client's
            # gap is a few ms, with its previous request's last tokens still being written and read),
            # at their own mean.
            own = hits_beyond_line(one_client_samples([json.load(open(p)) for p in wake.split(",")]))
            if len(own) < 10:
                sys.exit(f"{len(own)} hits in --wake runs: too few for --wake-open")
            quants = [round(quantile(own, i / 20), 6) for i in range(21)]
            wake_mean, wake_source = sum(quants[i] + quants[i + 1] for i in range(20)) / 40, "open-loop"
        else:
            # The one-client hits, as 21 quantiles shifted to the intercept's mean.
            own = hits_beyond_line(samples)
            if len(own) < 10 and not wake_constant:
                sys.exit(f"{len(own)} one-client hits (at most {hit_tokens} computed tokens): too few for "
                         "the wake-up's distribution (--wake-tokens, --wake-constant)")
            quants = [quantile(own, i / 20) for i in range(21)] if len(own) >= 2 else [0.0, 0.0]
            mean_q = sum(quants[i] + quants[i + 1] for i in range(20)) / 40
            quants = [round(q + intercept - mean_q, 6) for q in quants]
            wake_mean, wake_source = intercept, "one-client"
        step_overhead = at_least_zero("step_overhead_s", itl - (1 + slowdown) * decode)
        slope = 0.0
    else:
        xs, ys = [], []
        for s in samples:
            p, r = s["usage"]["prompt_tokens"], sum(s["usage"]["reused_tokens"].values())
            xs.append(p - min(r, p - 1))
            ys.append(s["timings"]["prefill_ms"] / 1e3 - modelled_prefill(p, r))
        mx, my = statistics.mean(xs), statistics.mean(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        slope = at_least_zero("admit_s_per_token", sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx) if sxx > 0 else 0.0
        intercept = at_least_zero("admit_s", my - slope * mx)
    # The line's residuals with the terms as used (a clamp shows as residuals that no longer average 0).
    used_slope = 1 + slowdown if steps_path else slope
    residuals = [y - (intercept + used_slope * x) for x, y in zip(xs, ys)]
    REPORT["line"] = {"requests": len(xs), "intercept_s": intercept, "slope": used_slope,
                      "residual_mean_s": statistics.mean(residuals),
                      "residual_rms_s": statistics.mean(r * r for r in residuals) ** 0.5,
                      "residual_max_abs_s": max(abs(r) for r in residuals)}
    out = dict(rates)
    out["source"] = source_text or "ragctl plan on this machine; serving fitted by bench/sim/calibrate.py on " + ", ".join(
        p for p in [steps_path, argv[2], miss, wake, rows, split] if p)
    out["serving"] = {
        "retrieval_s": round(retrieval, 6),
        "network_s": round(network, 6),
        "step_overhead_s": round(step_overhead, 6),
        "admit_s": round(intercept, 6),
        "prefill_token_s": round(slope, 9),
        "dense_model": dense_model,
    }
    if steps_path:
        out["serving"]["dense_curve"] = curve
        out["serving"]["sample_s"] = round(sample, 7)
        out["serving"]["prefill_context_s"] = float("%.4g" % context)
        out["serving"]["engine_slowdown"] = round(slowdown, 4)
        out["serving"]["network_quantiles"] = network_quantiles(samples)
        noise = step_noise_quantiles(samples)
        if noise:
            out["serving"]["step_noise_quantiles"] = noise
        # The one-client time per request beyond its steps is paid after the replica idled: it is
        # the wake-up (see above), and nothing is charged at admission.
        if wake_constant:
            out["serving"]["wake_s"] = round(intercept, 6)
        else:
            out["serving"]["wake_quantiles"] = quants
        out["serving"]["wake_after_s"] = wake_after_s
        out["serving"]["admit_s"] = 0.0
    if run_speed_sd is not None:
        # Measured by ragctl calibrate over its repeated runs (calibration_runs.h: run_speed_sd);
        # only seeded simulations draw it (cost_model.h).
        out["serving"]["run_speed_sd"] = float(run_speed_sd)
    note = ""
    if miss:
        x, want, got = fit(out, "publish_s_per_byte", miss, shlex.split(publish_sim), "e2e_ms", 1e-8)
        out["serving"]["publish_s_per_byte"] = float("%.4g" % x)
        REPORT["checks"].append({"name": "publish", "fitted": True, "metric": "mean e2e ms", "measured": want, "simulated": got})
        note += f"; publication {x * 1e9:.3f} ns/byte (mean e2e {want:.1f} ms measured, {got:.1f} ms simulated)"
    if rows:
        # The serving work per streamed token (the HTTP thread's write, a co-located client's read,
        # their wake-ups) shares the engine's cores: one client's decode step carries one row's in
        # step_overhead_s (fitted above), a step of k sequences k times that. Moved from the step
        # to the row, so that one client's TPOT stays as fitted.
        base_sample, base_over = out["serving"]["sample_s"], out["serving"]["step_overhead_s"]

        def per_row(x):
            x = min(x, base_over)
            out["serving"]["sample_s"] = round(base_sample + x, 7)
            out["serving"]["step_overhead_s"] = round(base_over - x, 7)
        x, want, got = fit(out, per_row, rows, shlex.split(rows_sim), "tpot_ms", 1e-4)
        per_row(x)
        REPORT["checks"].append({"name": "rows", "fitted": True, "metric": "mean TPOT ms", "measured": want, "simulated": got})
        note += (f"; per streamed row {min(x, base_over) * 1e3:.3f} ms" + (" (capped at the step overhead)" if x > base_over else "") +
                 f" (mean TPOT {want:.2f} ms measured, {got:.2f} ms simulated)")
    if wake and steps_path:  # a check: the wake-up comes from the one-client fit
        want, got = check(out, wake, shlex.split(wake_sim), "ttft_ms")
        note += f"; check {wake.split(',')[0]}...: mean TTFT {want:.1f} ms measured, {got:.1f} ms simulated"
        REPORT["checks"].append({"name": "wake", "fitted": False, "metric": "mean TTFT ms", "measured": want, "simulated": got})
    elif wake:
        x, want, got = fit(out, "wake_s", wake, shlex.split(wake_sim), "ttft_ms", 1e-3)
        out["serving"]["wake_s"] = round(x, 6)
        REPORT["checks"].append({"name": "wake", "fitted": True, "metric": "mean TTFT ms", "measured": want, "simulated": got})
        after = out["serving"].get("wake_after_s")
        note += (f"; wake-up {x * 1e3:.2f} ms" + (f" after {after * 1e3:g} ms idle" if after else "") +
                 f" (mean TTFT {want:.1f} ms measured, {got:.1f} ms simulated)")
    if split:  # a check, not fitted
        want, got = check(out, split, shlex.split(split_sim), "ttft_ms")
        note += f"; check {split.split(',')[0]}...: mean TTFT {want:.1f} ms measured, {got:.1f} ms simulated"
        REPORT["checks"].append({"name": "check", "fitted": False, "metric": "mean TTFT ms", "measured": want, "simulated": got})
    if FIT_WARNINGS:
        out["fit_warnings"] = FIT_WARNINGS
    if report_path:
        with open(report_path, "w") as f:
            json.dump(REPORT, f, indent=1)
    json.dump(out, sys.stdout, indent=1)
    print()
    print(f"# mean TPOT {itl * 1e3:.2f} ms, modelled decode {decode * 1e3:.2f} ms at {ctx:.0f} tokens; "
          f"{'TTFT' if steps_path else 'prefill'} residual "
          f"{'(engine slowdown %.1f %%) ' % (slowdown * 100) if steps_path else ''}"
          f"{intercept * 1e3:.2f} ms + {slope * 1e6:.1f} us/token over {len(xs)} requests{note}", file=sys.stderr)
    if steps_path and not wake_constant:
        print(f"# wake-up drawn from {len(own)} {wake_source} hits: p10 {quants[2] * 1e3:.2f} ms, p25 {quants[5] * 1e3:.2f}, "
              f"p50 {quants[10] * 1e3:.2f}, p75 {quants[15] * 1e3:.2f}, p90 {quants[18] * 1e3:.2f}, max "
              f"{quants[20] * 1e3:.2f}, mean {wake_mean * 1e3:.2f}" +
              (f" (shifted {(intercept - mean_q) * 1e3:+.2f})" if not wake_open else ""), file=sys.stderr)


if __name__ == "__main__":
    main()
