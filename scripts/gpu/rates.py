#!/usr/bin/env python3
"""Kernel rates for the sequence-parallel performance model (seqparallel/perf_model.h, `ragctl plan
--rates`) from one GPU run's measurements: engine.csv (bench_engine_cuda) and attention.csv
(scripts/gpu/attention_vs_sdpa.py, with bench_attention_cuda's raw prefill_positions / decode rows).

  dense_tokens_per_s   the engine's prefill of N tokens less `layers` times the attention kernel at N
  attn_pairs_per_s     causal (query, key) pairs per second over all layers, at the longest N measured
  masked_pairs_per_s   the same for the position-masked kernel (a 2-worker zigzag shard), if measured
  decode_dense_s       the best batch-1 decode step less its KV read at the batch-1 decode kernel rate
  kv_read_bytes_per_s  the batch-1 split-KV decode kernel at the longest KV length measured
  link_*               not measured by a single GPU: given on the command line, named in "source"

Usage: rates.py --engine engine.csv --attention attention.csv --layers 32 --kv-heads 8 --head-dim 128
                [--link-gbps 450 --link-latency-us 10 --link-source "NVLink 4 specification"] [--device NAME]
"""
import argparse
import csv
import json
import sys


def read_rows(path):
    with open(path, newline="") as fh:
        return [r for r in csv.reader(fh) if r]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", required=True)
    ap.add_argument("--attention", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--kv-heads", type=int, required=True)
    ap.add_argument("--head-dim", type=int, required=True)
    ap.add_argument("--kv-bytes", type=int, default=2, help="bytes per stored KV value (bf16: 2)")
    ap.add_argument("--link-gbps", type=float, default=450.0)
    ap.add_argument("--link-latency-us", type=float, default=10.0)
    ap.add_argument("--link-source", default="NVLink 4 specification, not measured")
    ap.add_argument("--device", default="GPU")
    a = ap.parse_args()

    engine = {}
    for r in read_rows(a.engine):
        if r[0] in ("kind",) or len(r) < 3:
            continue
        engine[(r[0], r[1])] = float(r[2])
    prefill_ms = {int(p.split("=")[1]): v for (k, p), v in engine.items() if k == "prefill_ms"}
    steps = {p: v for (k, p), v in engine.items() if k == "decode_step_ms" and p.startswith("batch=1;")}
    kv_tokens = {p: v for (k, p), v in engine.items() if k == "decode_kv_tokens"}
    causal, masked, decode = {}, {}, {}
    for r in read_rows(a.attention):
        if r[0].isdigit():
            causal[int(r[0])] = float(r[1])  # the script's summary row: tokens,ragd_ms,...
        elif r[0] == "prefill_positions":  # raw bench rows: kind,tokens,kv_len,heads,kv_heads,head_dim,time,rate
            masked[int(r[1])] = float(r[6])
        elif r[0] == "decode" and int(r[1]) == 1:
            decode[int(r[2])] = (float(r[6]), float(r[7]))  # kv_len -> (us, GB/s)
    missing = [name for name, d in (("prefill_ms", prefill_ms), ("batch-1 decode steps", steps),
                                    ("causal prefill", causal), ("batch-1 decode attention", decode)) if not d]
    if missing:
        sys.exit("rates.py: missing measurements: " + ", ".join(missing))

    n = max(prefill_ms)
    if n not in causal:
        sys.exit(f"rates.py: the attention bench has no {n}-token prefill to subtract from the engine's")
    dense = n / ((prefill_ms[n] - a.layers * causal[n]) * 1e-3)
    big = max(causal)
    pairs = big * (big + 1) / 2
    attn = pairs / (a.layers * causal[big] * 1e-3)
    masked_rate = pairs / (a.layers * masked[big] * 1e-3) if big in masked else attn
    kv_len = max(decode)
    read_rate = decode[kv_len][1] * 1e9
    short_rate = decode[min(decode)][1] * 1e9
    token_bytes = 2 * a.layers * a.kv_heads * a.head_dim * a.kv_bytes
    best = min(steps, key=steps.get)
    decode_dense = steps[best] * 1e-3 - kv_tokens.get(best, 0.0) * token_bytes / short_rate
    source = (f"{a.device}; dense from a {n}-token prefill, attention at {big} tokens"
              f"{'' if big in masked else ' (masked kernel not measured: the causal rate)'}, decode {best}; "
              f"link: {a.link_source}")
    out = {
        "source": source,
        "dense_tokens_per_s": round(dense),
        "attn_pairs_per_s": float(f"{attn:.4g}"),
        "masked_pairs_per_s": float(f"{masked_rate:.4g}"),
        "decode_dense_s": float(f"{decode_dense:.4g}"),
        "kv_read_bytes_per_s": float(f"{read_rate:.4g}"),
        "link_bytes_per_s": a.link_gbps * 1e9,
        "link_latency_s": float(f"{a.link_latency_us * 1e-6:.4g}"),
        "threads": 1,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
