#!/usr/bin/env python3
"""Client side of scripts/fleet-bench.sh (bench/FLEET_BENCH.md).

  load     a closed-loop RAG workload over the synthetic corpus (`ragctl bench --ingest-synthetic`
           topics, Zipf popularity), streamed (SSE): per request its start time, client TTFT,
           e2e, the generated token ids, usage (reused tokens per tier), the replica that answered
           (HAProxy's X-Ragd-Replica) and any error.
  sharing  replica B answers questions whose documents replica A computed: A's cold run, B's
           run with the KV from Redis, B's recompute of the same request (reuse = none).
  summary  tables (markdown) and a JSON summary of the result files of one fleet-bench run.
"""
import argparse
import http.client
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request

SYLLABLES = ["ka", "lo", "mi", "ru", "te", "zo", "bi", "na", "qu", "fe", "xi", "vo"]
ASK_WORDS = ["please", "explain", "summarize", "describe", "briefly", "overview", "details", "question",
             "compare", "why", "how", "list"]
FILLER = ["the", "river", "stone", "light", "market", "winter", "garden", "machine", "paper", "signal",
          "harbor", "forest", "bridge", "letter", "castle", "music", "engine", "orbit", "silver", "window",
          "story", "language"]


def topic_word(t):  # pipelines/synthetic_words.h: synthetic_topic_word
    w = "to"
    while True:
        w += SYLLABLES[t % 12]
        t //= 12
        if not t:
            return w


def workload(topics, zipf, n, seed, vary):
    """n (topic, question) pairs, topics drawn with Zipf(zipf) popularity. vary=False: one question
    per topic (so every request on a topic retrieves the same documents); vary=True: random ask
    words around the topic word, like `ragctl bench` (the top 4 then differ between questions on
    one topic once there are many topics)."""
    rng = random.Random(seed)
    weights = [1.0 / (t + 1) ** zipf for t in range(topics)]
    picks = rng.choices(range(topics), weights=weights, k=n)
    out = []
    for t in picks:
        r = rng if vary else random.Random(t)
        out.append((t, f"{r.choice(ASK_WORDS)} {topic_word(t)} {r.choice(ASK_WORDS)}?"))
    return out


def stream_run(url, query, max_tokens=16, reuse=None, timeout=300):
    """One streamed run. Returns a dict: ok, ttft_ms, e2e_ms, tokens, usage, timings, replica, error."""
    u = urllib.parse.urlsplit(url)
    body = {"query": query, "max_tokens": max_tokens, "temperature": 0, "stream": True}
    if reuse:
        body["reuse"] = reuse
    out = {"ok": False, "ttft_ms": None, "tokens": [], "usage": None, "timings": None, "replica": None,
           "error": None}
    t0 = time.monotonic()
    try:
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
        conn.request("POST", "/v1/pipelines/default/runs", json.dumps(body),
                     {"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        out["replica"] = resp.getheader("X-Ragd-Replica")
        if resp.status != 200:
            out["error"] = f"HTTP {resp.status}: {resp.read()[:300].decode(errors='replace')}"
        else:
            event = None
            while True:
                line = resp.readline()
                if not line:
                    break
                line = line.decode().rstrip("\r\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data = json.loads(line[5:])
                    ev = event or data.get("event")
                    if ev == "token":
                        if out["ttft_ms"] is None:
                            out["ttft_ms"] = (time.monotonic() - t0) * 1000
                        out["tokens"].append(data.get("token_id"))
                    elif ev == "done":
                        out["ok"] = True
                        out["usage"] = data.get("usage")
                        out["timings"] = data.get("timings")
                        out["id"] = data.get("id")
                        break
                    elif ev == "error":
                        out["error"] = json.dumps(data)[:300]
                        break
            if not out["ok"] and not out["error"]:
                out["error"] = "stream ended without a done event"
        conn.close()
    except Exception as e:  # a client error is a result here, counted, not a crash
        out["error"] = f"{type(e).__name__}: {e}"
    out["e2e_ms"] = (time.monotonic() - t0) * 1000
    return out


def cmd_load(a):
    reqs = workload(a.topics, a.zipf, a.requests, a.seed, a.vary)
    results = [None] * len(reqs)
    nxt = [0]
    lock = threading.Lock()
    t_start = time.time()
    m0 = time.monotonic()

    def worker():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= len(reqs):
                return
            topic, q = reqs[i]
            t = time.monotonic() - m0
            r = stream_run(a.url, q, a.max_tokens, a.reuse or None)
            r.update({"i": i, "topic": topic, "query": q, "t_s": t})
            results[i] = r

    threads = [threading.Thread(target=worker) for _ in range(a.concurrency)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wall = time.monotonic() - m0
    doc = {"url": a.url, "topics": a.topics, "zipf": a.zipf, "requests": a.requests, "seed": a.seed,
           "concurrency": a.concurrency, "vary": a.vary, "max_tokens": a.max_tokens, "started": t_start, "wall_s": wall,
           "samples": results}
    with open(a.out, "w") as f:
        json.dump(doc, f)
    s = summarize(results)
    print(f"{a.out}: n={s['n']} errors={s['errors']} TTFT p50 {s['ttft_p50']:.1f} p99 {s['ttft_p99']:.1f} ms, "
          f"reused {100 * s['reused_frac']:.1f} % of prompt tokens (remote {100 * s['remote_frac']:.1f} %), "
          f"{wall:.1f} s")


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def summarize(samples):
    ok = [s for s in samples if s and s["ok"]]
    prompt = sum(s["usage"]["prompt_tokens"] for s in ok)
    tiers = {t: sum(s["usage"]["reused_tokens"].get(t, 0) for s in ok) for t in ("hbm", "dram", "ssd", "remote")}
    reused = sum(tiers.values())
    ttft = [s["ttft_ms"] for s in ok if s["ttft_ms"] is not None]
    # A document hit: at least half of the prompt's tokens came from a KV tier (every request
    # reuses the pipeline's system prompt, so "reused > 0" says nothing).
    doc_hits = sum(1 for s in ok if sum(s["usage"]["reused_tokens"].values()) * 2 >= s["usage"]["prompt_tokens"])
    replicas = {}
    for s in samples:
        if s:
            replicas[s.get("replica") or "?"] = replicas.get(s.get("replica") or "?", 0) + 1
    return {"n": len(samples), "ok": len(ok), "errors": len(samples) - len(ok),
            "ttft_p50": pct(ttft, 50), "ttft_p90": pct(ttft, 90), "ttft_p99": pct(ttft, 99),
            "ttft_mean": statistics.fmean(ttft) if ttft else float("nan"),
            "prompt_tokens": prompt, "reused_tokens": reused, "tiers": tiers,
            "reused_frac": reused / prompt if prompt else 0.0,
            "remote_frac": tiers["remote"] / prompt if prompt else 0.0,
            "doc_hit_rate": doc_hits / len(ok) if ok else 0.0,
            "remote_requests": sum(1 for s in ok if s["usage"]["reused_tokens"].get("remote", 0) > 0),
            "replicas": replicas}


# --- sharing -----------------------------------------------------------------------------------

def http_json(method, url, body=None, timeout=60):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, None


def cmd_sharing(a):
    rng = random.Random(a.seed)
    sets = []
    words = a.words
    for rep in range(a.reps):
        word = topic_word(5000 + rep)  # never one of the bench's synthetic topics
        while True:
            docs = []
            for j in range(4):
                text = f"Report on {word}, part {j}."
                for w in range(words):
                    text += " " + (word if w % 3 == 0 else rng.choice(FILLER))
                docs.append({"id": f"share-{a.seed}-{rep}-d{j}", "text": text + "."})
            st, r = http_json("POST", a.primary + "/v1/documents", {"documents": docs})
            if st // 100 != 2:
                sys.exit(f"sharing: ingest on the primary: HTTP {st}")
            if r.get("chunks") == 4:
                break
            # A document longer than one chunk (runtime.chunk_tokens) is split: drop it, use fewer words.
            for d in docs:
                http_json("DELETE", f"{a.primary}/v1/documents/{d['id']}")
            words -= 4
            if words < 8:
                sys.exit("sharing: cannot fit a document in one chunk")
        sets.append((word, [d["id"] for d in docs]))
    print(f"sharing: {a.reps} sets of 4 documents of {words} words each")
    # Wait until both replicas see the new documents (secondaries catch up every second).
    for url in (a.url_a, a.url_b):
        for _ in range(300):
            if http_json("GET", f"{url}/v1/documents/{sets[-1][1][-1]}")[0] == 200:
                break
            time.sleep(0.1)
        else:
            sys.exit(f"sharing: {url} does not see the new documents")
    rows = []
    for rep, (word, ids) in enumerate(sets):
        q = f"please explain {word} in detail?"
        a_cold = stream_run(a.url_a, q, a.max_tokens)
        time.sleep(a.settle_s)  # A writes behind; let the segments land in Redis
        b_hit = stream_run(a.url_b, q, a.max_tokens)
        b_none = stream_run(a.url_b, q, a.max_tokens, reuse="none")
        for name, r in (("A", a_cold), ("B hit", b_hit), ("B none", b_none)):
            if not r["ok"]:
                sys.exit(f"sharing rep {rep}: {name} failed: {r['error']}")
        row = {"rep": rep, "query": q, "prompt_tokens": a_cold["usage"]["prompt_tokens"],
               "a_ttft_ms": a_cold["ttft_ms"], "b_remote_ttft_ms": b_hit["ttft_ms"],
               "b_recompute_ttft_ms": b_none["ttft_ms"], "a_usage": a_cold["usage"], "b_usage": b_hit["usage"],
               "b_none_usage": b_none["usage"], "b_timings": b_hit["timings"],
               "b_none_timings": b_none["timings"], "a_timings": a_cold["timings"],
               "same_output": a_cold["tokens"] == b_hit["tokens"] == b_none["tokens"],
               "tokens": a_cold["tokens"]}
        rows.append(row)
        print(f"rep {rep}: prompt {row['prompt_tokens']}, B remote {b_hit['usage']['reused_tokens']['remote']} tokens; "
              f"TTFT A cold {a_cold['ttft_ms']:.1f}, B remote {b_hit['ttft_ms']:.1f}, B recompute {b_none['ttft_ms']:.1f} ms; "
              f"same output: {row['same_output']}")
    with open(a.out, "w") as f:
        json.dump({"reps": rows, "words": words}, f)


# --- capture -----------------------------------------------------------------------------------

METRIC_KEYS = ("ragd_reused_tokens_total", "ragd_kv_remote_events", "ragd_kv_remote_breaker_open",
               "ragd_kv_remote_bytes", 'key="tiers.hbm.evictions"', 'key="kv_pool.free_blocks"')


def cmd_capture(a):
    env = {}
    for line in open(a.env):
        k, _, v = line.strip().partition("=")
        env[k] = v.strip('"')
    info = {"metrics": {}, "redis": {}}
    for k, v in env.items():
        if k.startswith("URL_replica_"):
            name = "replica-" + k[len("URL_replica_"):]
            try:
                with urllib.request.urlopen(v + "/metrics", timeout=10) as r:
                    text = r.read().decode()
                info["metrics"][name] = [l for l in text.splitlines()
                                         if not l.startswith("#") and any(m in l for m in METRIC_KEYS)]
            except Exception as e:
                info["metrics"][name] = [f"unreachable: {e}"]
    import subprocess
    try:
        auth = {"REDISCLI_AUTH": open(env["REDIS_PASSWORD_FILE"]).read().strip()} if env.get("REDIS_PASSWORD_FILE") else {}
        out = subprocess.run(["redis-cli", "-p", env["REDIS_PORT"], "info"], capture_output=True, text=True,
                             env={**os.environ, **auth},
                             timeout=10).stdout
        for line in out.splitlines():
            k, _, v = line.strip().partition(":")
            if k in ("used_memory", "used_memory_human", "maxmemory", "maxmemory_human", "maxmemory_policy",
                     "evicted_keys", "keyspace_hits", "keyspace_misses", "uptime_in_seconds"):
                info["redis"][k] = v
    except Exception as e:
        info["redis"]["error"] = str(e)
    for kv in a.extra:
        k, _, v = kv.partition("=")
        try:
            info[k] = float(v)
        except ValueError:
            info[k] = v
    with open(a.out, "w") as f:
        json.dump(info, f, indent=1)


# --- summary -----------------------------------------------------------------------------------

def load(path):
    with open(path) as f:
        return json.load(f)


def outputs(doc):
    return {s["i"]: s["tokens"] for s in doc["samples"] if s and s["ok"]}


def compare(doc, ref):
    mine, theirs = outputs(doc), outputs(ref)
    both = sorted(set(mine) & set(theirs))
    return sum(1 for i in both if mine[i] == theirs[i]), len(both)


def f1(x):
    return f"{x:.1f}"


def opportunities(samples, gap_s=1.0):
    """Requests that could only be hits through the shared tier: the other replica finished the
    same question at least gap_s earlier and this replica had not seen it. Returns (count, how many
    reused at least half of the prompt from Redis, how many any remote token)."""
    done = {}
    n = full = some = 0
    for s in sorted((x for x in samples if x and x["ok"]), key=lambda x: x["t_s"]):
        prev = done.get(s["query"], [])
        others = [t for r, t in prev if r != s["replica"] and t <= s["t_s"] - gap_s]
        mine = [t for r, t in prev if r == s["replica"]]
        if others and not mine:
            n += 1
            remote = s["usage"]["reused_tokens"].get("remote", 0)
            full += remote * 2 >= s["usage"]["prompt_tokens"]
            some += remote > 0
        done.setdefault(s["query"], []).append((s["replica"], s["t_s"] + s["e2e_ms"] / 1000))
    return n, full, some


def info_of(d, name):
    try:
        return load(f"{d}/{name}-info.json")
    except FileNotFoundError:
        return {}


def metrics_block(md, info):
    if info.get("metrics"):
        md.append("Replica counters at the end of the run (`/metrics`):\n")
        md.append("```")
        for rep, lines in sorted(info["metrics"].items()):
            for line in lines:
                md.append(f"{rep}: {line}")
        md.append("```\n")


def cmd_summary(a):
    d = a.dir
    out, md = {}, []
    md.append(f"Machine: {a.machine}\n")
    # (a) sharing
    try:
        sh = load(f"{d}/sharing.json")
        reps = sh["reps"]
        p50 = lambda k: statistics.median(r[k] for r in reps)
        remote = [r["b_usage"]["reused_tokens"]["remote"] for r in reps]
        out["sharing"] = {"reps": len(reps), "prompt_tokens": statistics.median(r["prompt_tokens"] for r in reps),
                          "remote_tokens_p50": statistics.median(remote),
                          "a_cold_ttft_p50": p50("a_ttft_ms"), "b_remote_ttft_p50": p50("b_remote_ttft_ms"),
                          "b_recompute_ttft_p50": p50("b_recompute_ttft_ms"),
                          "b_kv_load_ms_p50": statistics.median(r["b_timings"]["kv_load_ms"] for r in reps),
                          "identical_outputs": sum(r["same_output"] for r in reps)}
        s = out["sharing"]
        md.append("### (a) Sharing: replica B answers with the documents replica A computed\n")
        md.append(f"{s['reps']} questions, each over 4 new documents (one chunk each), prompt "
                  f"{s['prompt_tokens']:.0f} tokens of which B loaded {s['remote_tokens_p50']:.0f} from Redis (p50).\n")
        md.append("| | TTFT p50 (ms) | vs B recompute |")
        md.append("|---|---|---|")
        md.append(f"| B, documents' KV from Redis | {f1(s['b_remote_ttft_p50'])} | "
                  f"{s['b_recompute_ttft_p50'] / s['b_remote_ttft_p50']:.2f}x lower |")
        md.append(f"| B, same request, `reuse = none` (recompute) | {f1(s['b_recompute_ttft_p50'])} | 1 |")
        md.append(f"| A, first run (cold: nothing cached anywhere) | {f1(s['a_cold_ttft_p50'])} | |")
        md.append(f"\nGreedy output identical (A, B from Redis, B recomputed): {s['identical_outputs']} of {s['reps']}. "
                  f"B's KV load time p50 {s['b_kv_load_ms_p50']:.1f} ms.\n")
    except FileNotFoundError:
        pass
    # (b) fleet with / without the shared tier
    runs = [r for r in a.runs]
    if runs:
        md.append("### (b) Two replicas behind HAProxy, Zipf(0.9), with and without the shared tier\n")
        md.append("| run | requests | errors | TTFT p50 (ms) | TTFT p99 (ms) | document hit rate | prompt tokens reused | of which remote | requests per replica | outputs = no-Redis reference | Redis used / evicted keys |")
        md.append("|---|---|---|---|---|---|---|---|---|---|---|")
        ref = load(f"{d}/{a.reference}.json") if a.reference else None
        out["runs"] = {}
        for name in runs:
            doc = load(f"{d}/{name}.json")
            s = summarize(doc["samples"])
            same, n = compare(doc, ref) if ref else (0, 0)
            s["same_as_reference"], s["compared"] = same, n
            info = info_of(d, name)
            s["info"] = info
            out["runs"][name] = s
            reps = ", ".join(f"{k} {v}" for k, v in sorted(s["replicas"].items()))
            rd = info.get("redis", {})
            redis = f"{rd.get('used_memory_human', '-')} / {rd.get('evicted_keys', '-')}" if info.get("remote") else "no Redis"
            md.append(f"| {name} | {s['n']} | {s['errors']} | {f1(s['ttft_p50'])} | {f1(s['ttft_p99'])} | "
                      f"{100 * s['doc_hit_rate']:.1f} % | {100 * s['reused_frac']:.1f} % | {100 * s['remote_frac']:.1f} % | "
                      f"{reps} | {same} / {n} | {redis} |")
        pairs = [(w, wo) for w, wo in zip(a.with_runs, a.without_runs)]
        if pairs:
            md.append("")
            for w, wo in pairs:
                sw, so = out["runs"][w], out["runs"][wo]
                md.append(f"- {wo} / {w} (no tier / shared tier, >1 = the tier is faster): TTFT p50 "
                          f"{so['ttft_p50'] / sw['ttft_p50']:.2f}x, p99 {so['ttft_p99'] / sw['ttft_p99']:.2f}x; "
                          f"document hit rate {100 * sw['doc_hit_rate']:.1f} % with the tier, "
                          f"{100 * so['doc_hit_rate']:.1f} % without")
            md.append("")
        for name in runs:
            n, full, some = opportunities(load(f"{d}/{name}.json")["samples"])
            out["runs"][name]["cross_replica"] = {"requests": n, "half_from_remote": full, "any_remote": some}
            md.append(f"- {name}: {n} requests asked a replica a question the other replica had answered at least "
                      f"1 s before (and this one never): {full} of them loaded at least half of the prompt from "
                      f"Redis, {some} anything from Redis")
        md.append("")
        md.append("TTFT by where the prompt's KV came from (remote hit: at least half of the prompt from Redis; "
                  "local hit: at least half from the replica's own tiers; miss: neither):\n")
        md.append("| run | local hits: n, TTFT p50 (ms) | remote hits: n, TTFT p50 (ms) | misses: n, TTFT p50 (ms) |")
        md.append("|---|---|---|---|")
        for name in runs:
            by = {"local": [], "remote": [], "miss": []}
            for x in load(f"{d}/{name}.json")["samples"]:
                if not (x and x["ok"]):
                    continue
                u = x["usage"]
                rt, pt = u["reused_tokens"], u["prompt_tokens"]
                k = "remote" if rt.get("remote", 0) * 2 >= pt else "local" if sum(rt.values()) * 2 >= pt else "miss"
                by[k].append(x["ttft_ms"])
            out["runs"][name]["by_source"] = {k: {"n": len(v), "ttft_p50": pct(v, 50)} for k, v in by.items()}
            cell = lambda v: f"{len(v)}, {f1(pct(v, 50))}" if v else "0, -"
            md.append(f"| {name} | {cell(by['local'])} | {cell(by['remote'])} | {cell(by['miss'])} |")
        md.append("")
        for name in runs:
            if out["runs"][name]["info"].get("remote"):
                md.append(f"{name}:")
                metrics_block(md, out["runs"][name]["info"])
    # (c) faults
    try:
        fl = load(f"{d}/faults.json")
        ev = info_of(d, "faults")
        ev["kill_s"] = ev["kill_at"] - fl["started"]
        ev["restart_s"] = ev["restart_at"] - fl["started"]
        kill, restart = ev["kill_s"], ev["restart_s"]
        ref = load(f"{d}/{a.reference}.json") if a.reference else None
        same, n = compare(fl, ref) if ref else (0, 0)
        windows = [("before the kill", 0, kill), ("Redis down", kill, restart),
                   ("after the restart, first 5 s", restart, restart + 5), ("after the restart, rest", restart + 5, 1e9)]
        md.append(f"### (c) Redis killed (SIGKILL) {kill:.1f} s into the run, restarted (empty) at {restart:.1f} s\n")
        md.append("| window (by request start) | requests | errors | TTFT p50 (ms) | TTFT p99 (ms) | prompt tokens reused | of which remote |")
        md.append("|---|---|---|---|---|---|---|")
        out["faults"] = {"kill_s": kill, "restart_s": restart, "windows": {}, "same_as_reference": same, "compared": n}
        for name, lo, hi in windows:
            ss = [s for s in fl["samples"] if s and lo <= s["t_s"] < hi]
            s = summarize(ss)
            out["faults"]["windows"][name] = s
            md.append(f"| {name} | {s['n']} | {s['errors']} | {f1(s['ttft_p50'])} | {f1(s['ttft_p99'])} | "
                      f"{100 * s['reused_frac']:.1f} % | {100 * s['remote_frac']:.1f} % |")
        tot = summarize(fl["samples"])
        out["faults"]["total"] = tot
        md.append(f"\nClient errors: {tot['errors']} of {tot['n']}. Outputs equal to the no-Redis reference run: "
                  f"{same} of {n}.\n")
        # Breaker transitions seen by the 0.5 s poll of each replica's /metrics.
        try:
            trans = {}
            last = {}
            for line in open(f"{d}/faults-timeline.txt"):
                parts = line.split()
                if len(parts) < 3 or not parts[2].startswith("breaker_open="):
                    continue
                t, rep, b = float(parts[0]) - fl["started"], parts[1], parts[2].split("=")[1]
                if last.get(rep) is not None and b != last[rep]:
                    trans.setdefault(rep, []).append(f"{'opened' if b == '1' else 'closed'} at {t:.1f} s")
                last[rep] = b
            out["faults"]["breaker"] = trans
            md.append("Circuit breaker (polled every 0.5 s): " + "; ".join(
                f"{rep} {', '.join(v)}" for rep, v in sorted(trans.items())) + ".\n")
        except FileNotFoundError:
            pass
        metrics_block(md, ev)
    except FileNotFoundError:
        pass
    # (d) tiny Redis
    try:
        tiny = load(f"{d}/tiny.json")
        ev = info_of(d, "tiny")
        rd = ev.get("redis", {})
        s = summarize(tiny["samples"])
        ref = load(f"{d}/{a.reference}.json") if a.reference else None
        same, n = compare(tiny, ref) if ref else (0, 0)
        big = out.get("runs", {}).get(a.with_runs[0]) if a.with_runs else None
        out["tiny"] = dict(s, same_as_reference=same, compared=n, info=ev)
        bigrd = big["info"].get("redis", {}) if big else {}
        md.append(f"### (d) Redis maxmemory {rd.get('maxmemory_human', '?')}, {rd.get('maxmemory_policy', '?')}\n")
        md.append("| run | requests | errors | TTFT p50 (ms) | TTFT p99 (ms) | document hit rate | prompt tokens reused | of which remote | Redis evicted keys |")
        md.append("|---|---|---|---|---|---|---|---|---|")
        if big:
            md.append(f"| {a.with_runs[0]} (maxmemory {bigrd.get('maxmemory_human', '?')}) | {big['n']} | {big['errors']} | {f1(big['ttft_p50'])} | "
                      f"{f1(big['ttft_p99'])} | {100 * big['doc_hit_rate']:.1f} % | {100 * big['reused_frac']:.1f} % | "
                      f"{100 * big['remote_frac']:.1f} % | {bigrd.get('evicted_keys', '?')} |")
        md.append(f"| tiny | {s['n']} | {s['errors']} | {f1(s['ttft_p50'])} | {f1(s['ttft_p99'])} | "
                  f"{100 * s['doc_hit_rate']:.1f} % | {100 * s['reused_frac']:.1f} % | {100 * s['remote_frac']:.1f} % | "
                  f"{rd.get('evicted_keys', '?')} |")
        md.append(f"\nOutputs equal to the no-Redis reference run: {same} of {n}.\n")
        metrics_block(md, ev)
    except FileNotFoundError:
        pass
    # (e) replicas restarted behind a warm Redis
    try:
        load(f"{d}/rejoin-remote.json")
        wi, ri = info_of(d, "warmup-remote"), info_of(d, "rejoin-remote")
        md.append("### (e) Replicas restarted (empty local tiers) behind a warm Redis\n")
        md.append(f"The workload once (`warmup-*`; with the tier Redis then held {wi.get('redis', {}).get('used_memory_human', '?')}), "
                  "both replicas restarted with empty local KV tiers, the same workload again (`rejoin-*`); "
                  "`*-norem`: the same fleet without Redis.\n")
        md.append("| run | requests | errors | TTFT p50 (ms) | TTFT p99 (ms) | document hit rate | prompt tokens reused | of which remote | outputs = no-Redis reference |")
        md.append("|---|---|---|---|---|---|---|---|---|")
        ref = load(f"{d}/{a.reference}.json") if a.reference else None
        out["rejoin"] = {}
        for name in ["rejoin-norem", "rejoin-remote", "warmup-norem", "warmup-remote"]:
            try:
                doc = load(f"{d}/{name}.json")
            except FileNotFoundError:
                continue
            s = summarize(doc["samples"])
            same, n = compare(doc, ref) if ref else (0, 0)
            out["rejoin"][name] = dict(s, same_as_reference=same, compared=n)
            md.append(f"| {name} | {s['n']} | {s['errors']} | {f1(s['ttft_p50'])} | {f1(s['ttft_p99'])} | "
                      f"{100 * s['doc_hit_rate']:.1f} % | {100 * s['reused_frac']:.1f} % | {100 * s['remote_frac']:.1f} % | {same} / {n} |")
        r = out["rejoin"]
        if "rejoin-norem" in r:
            b, w = r["rejoin-norem"], r["rejoin-remote"]
            md.append(f"\n- rejoin-norem / rejoin-remote (>1 = Redis helps): TTFT p50 {b['ttft_p50'] / w['ttft_p50']:.2f}x, "
                      f"p99 {b['ttft_p99'] / w['ttft_p99']:.2f}x")
        md.append("")
        metrics_block(md, ri)
    except FileNotFoundError:
        pass
    with open(f"{d}/summary.json", "w") as f:
        json.dump(out, f, indent=1)
    with open(f"{d}/results.md", "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


def cmd_mac(a):
    """Part (m): the MAC's cost. Pairs of fleets, sealed (the default) and trust_unauthenticated,
    each running the sharing script (B's remote hits) and the Zipf load; medians over the pairs."""
    d = a.dir
    rows = {}
    for mode in ("on", "off"):
        share, runs = [], []
        for p in range(1, a.pairs + 1):
            try:
                share += load(f"{d}/mac-{mode}-sharing-{p}.json")["reps"]
                runs.append(load(f"{d}/mac-{mode}-load-{p}.json"))
            except FileNotFoundError:
                continue
        if not share or not runs:
            sys.exit(f"mac: no runs with the MAC {mode} in {d}")
        remote_hits = [s["ttft_ms"] for r in runs for s in r["samples"]
                       if s and s["ok"] and s["usage"]["reused_tokens"].get("remote", 0) * 2 >= s["usage"]["prompt_tokens"]]
        ok = sum(1 for r in runs for s in r["samples"] if s and s["ok"])
        rows[mode] = {"sharing_reps": len(share),
                      "b_remote_ttft_p50": statistics.median(r["b_remote_ttft_ms"] for r in share),
                      "b_kv_load_ms_p50": statistics.median(r["b_timings"]["kv_load_ms"] for r in share),
                      "remote_tokens_p50": statistics.median(r["b_usage"]["reused_tokens"]["remote"] for r in share),
                      "load_runs": len(runs), "load_ok": ok,
                      "load_rps": ok / sum(r["wall_s"] for r in runs),
                      "load_remote_hits": len(remote_hits),
                      "load_remote_hit_ttft_p50": pct(remote_hits, 50) if remote_hits else float("nan"),
                      "same_outputs": sum(r["same_output"] for r in share)}
    on, off = rows["on"], rows["off"]
    rows["ratio_on_over_off"] = {k: on[k] / off[k] for k in ("b_remote_ttft_p50", "load_remote_hit_ttft_p50", "load_rps")}
    with open(f"{d}/mac-summary.json", "w") as f:
        json.dump(rows, f, indent=1)
    md = [f"Machine: {a.machine}\n", "| MAC | B's remote-hit TTFT p50 (sharing) | B's KV load p50 | remote tokens p50 | "
          "Zipf load: req/s | remote hits: n, TTFT p50 | greedy output identical |", "|---|---:|---:|---:|---:|---:|---:|"]
    for mode in ("off", "on"):
        r = rows[mode]
        md.append(f"| {mode} | {r['b_remote_ttft_p50']:.1f} ms | {r['b_kv_load_ms_p50']:.1f} ms | {r['remote_tokens_p50']:.0f} | "
                  f"{r['load_rps']:.2f} | {r['load_remote_hits']}, {r['load_remote_hit_ttft_p50']:.1f} ms | "
                  f"{r['same_outputs']} / {r['sharing_reps']} |")
    q = rows["ratio_on_over_off"]
    md.append(f"\nOn / off: remote-hit TTFT {q['b_remote_ttft_p50']:.3f}x (sharing), "
              f"{q['load_remote_hit_ttft_p50']:.3f}x (Zipf load); throughput {q['load_rps']:.3f}x.")
    open(f"{d}/mac-results.md", "w").write("\n".join(md) + "\n")
    print("\n".join(md))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    l = sub.add_parser("load")
    l.add_argument("--url", required=True)
    l.add_argument("--topics", type=int, default=100)
    l.add_argument("--zipf", type=float, default=0.9)
    l.add_argument("--requests", type=int, default=300)
    l.add_argument("--concurrency", type=int, default=4)
    l.add_argument("--seed", type=int, default=1)
    l.add_argument("--max-tokens", type=int, default=16)
    l.add_argument("--reuse", default="")
    l.add_argument("--vary", action="store_true", help="random ask words per request (ragctl bench's workload)")
    l.add_argument("--out", required=True)
    s = sub.add_parser("sharing")
    s.add_argument("--primary", required=True)
    s.add_argument("--url-a", required=True)
    s.add_argument("--url-b", required=True)
    s.add_argument("--reps", type=int, default=8)
    s.add_argument("--words", type=int, default=80, help="words per document to start from (fewer until it fits one chunk)")
    s.add_argument("--max-tokens", type=int, default=16)
    s.add_argument("--settle-s", type=float, default=1.0)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--out", required=True)
    c = sub.add_parser("capture", help="counters of a running fleet (replica /metrics, Redis INFO) as JSON")
    c.add_argument("--env", required=True, help="the fleet's fleet.env")
    c.add_argument("--out", required=True)
    c.add_argument("extra", nargs="*", help="KEY=VALUE pairs added to the JSON")
    m = sub.add_parser("summary")
    m.add_argument("--dir", required=True)
    m.add_argument("--runs", nargs="*", default=[])
    m.add_argument("--with-runs", nargs="*", default=[])
    m.add_argument("--without-runs", nargs="*", default=[])
    m.add_argument("--reference", default="")
    m.add_argument("--machine", default="")
    mc = sub.add_parser("mac", help="part (m): the remote values' MAC on against off")
    mc.add_argument("--dir", required=True)
    mc.add_argument("--pairs", type=int, default=2)
    mc.add_argument("--machine", default="")
    a = p.parse_args()
    {"load": cmd_load, "sharing": cmd_sharing, "capture": cmd_capture, "summary": cmd_summary, "mac": cmd_mac}[a.cmd](a)


if __name__ == "__main__":
    main()
