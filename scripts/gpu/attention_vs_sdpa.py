#!/usr/bin/env python3
"""Causal bf16 prefill attention: ragd's CUDA kernel vs torch.nn.functional.scaled_dot_product_attention.

Runs on the GPU machine (scripts/gpu/run.sh). Both sides get the same shape (Llama-3-8B attention:
32 query heads, 8 KV heads, head dim 128, one sequence of N tokens, causal) and are credited with the
same FLOP count, 4 * head_dim * heads * N(N+1)/2, so the ratio is a ratio of times. SDPA gets K/V
already expanded to 32 heads (the expansion is outside its timing); ragd reads 8 KV heads from a
paged pool (block size 16). Writes attention.csv and attention.md under --out.
"""
import argparse
import csv
import os
import subprocess
import sys


def time_sdpa(n, heads, kv_heads, d, iters):
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    q = torch.rand(1, heads, n, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
    k = torch.rand(1, kv_heads, n, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
    v = torch.rand(1, kv_heads, n, d, device="cuda", dtype=torch.bfloat16) * 2 - 1
    rep = heads // kv_heads
    k = k.repeat_interleave(rep, dim=1).contiguous()
    v = v.repeat_interleave(rep, dim=1).contiguous()
    for _ in range(2):
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / iters
    del q, k, v
    torch.cuda.empty_cache()
    return ms


def check_against_sdpa(dump_dir, n, heads, kv_heads, d):
    """Max |ragd - SDPA| on the dumped causal prefill (bf16 out; both fp32-accumulated)."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    def load(name, rows, h):
        raw = np.fromfile(os.path.join(dump_dir, name), dtype=np.uint16)
        t = torch.from_numpy(raw.astype(np.int16)).view(torch.bfloat16)
        return t.reshape(rows, h, d).permute(1, 0, 2).unsqueeze(0).cuda()

    q = load("q.bin", n, heads)
    k = load("k.bin", n, kv_heads).repeat_interleave(heads // kv_heads, dim=1)
    v = load("v.bin", n, kv_heads).repeat_interleave(heads // kv_heads, dim=1)
    ours = load("out.bin", n, heads).float()
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    return (ours - ref).abs().max().item()


def flops(n, heads, d):
    return 4.0 * d * heads * (n * (n + 1) / 2.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="path to bench_attention_cuda")
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--tokens", default="4096,8192,16384,32768,65536")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--check-tokens", type=int, default=4001, help="causal prefill checked against SDPA (fp32)")
    args = ap.parse_args()
    tokens = [int(t) for t in args.tokens.split(",") if t]

    import torch

    print(f"torch {torch.__version__}, device {torch.cuda.get_device_name(0)}", flush=True)
    import tempfile
    dump_dir = tempfile.mkdtemp(prefix="ragd-attn-")
    cmd = [args.bench, "--tokens", args.tokens, "--heads", str(args.heads), "--kv-heads", str(args.kv_heads),
           "--head-dim", str(args.head_dim), "--iters", str(args.iters), "--dump-dir", dump_dir,
           "--dump-tokens", str(args.check_tokens)]
    print("running:", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    ragd = {}
    positions_rows = []
    decode_rows = []
    for row in csv.reader(proc.stdout.splitlines()):
        if row and row[0] == "prefill":
            ragd[int(row[1])] = float(row[6])
        elif row and row[0] == "prefill_positions":
            positions_rows.append(row)
        elif row and row[0] == "decode":
            decode_rows.append(row)
    if proc.returncode != 0:
        print(f"bench_attention_cuda exited with {proc.returncode}", flush=True)
    kernel = next((line.split(":", 1)[1].strip() for line in proc.stderr.splitlines()
                   if line.startswith("prefill kernel:")), "unknown")

    check = None
    try:
        check = check_against_sdpa(dump_dir, args.check_tokens, args.heads, args.kv_heads, args.head_dim)
        verdict = "PASS" if check <= 2e-2 else "FAIL"
        print(f"check: {args.check_tokens}-token causal prefill, max |ragd - sdpa(fp32)| = {check:.3e} "
              f"(bound 2e-2: bf16 output and bf16 P) {verdict}", flush=True)
    except Exception as e:
        print(f"check against SDPA failed to run: {e}", flush=True)

    rows = []
    for n in tokens:
        try:
            sdpa_ms = time_sdpa(n, args.heads, args.kv_heads, args.head_dim, args.iters)
        except Exception as e:  # report, keep the other sizes
            print(f"sdpa N={n}: {e}", flush=True)
            sdpa_ms = float("nan")
        f = flops(n, args.heads, args.head_dim)
        r_ms = ragd.get(n, float("nan"))
        r_tf = f / (r_ms * 1e-3) / 1e12
        s_tf = f / (sdpa_ms * 1e-3) / 1e12
        rows.append((n, r_ms, r_tf, sdpa_ms, s_tf, r_tf / s_tf))
        print(f"N={n}: ragd {r_ms:.3f} ms {r_tf:.1f} TFLOP/s | sdpa {sdpa_ms:.3f} ms {s_tf:.1f} TFLOP/s | ratio {r_tf / s_tf:.2f}",
              flush=True)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "attention.csv"), "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["tokens", "ragd_ms", "ragd_tflops", "sdpa_ms", "sdpa_tflops", "ragd_over_sdpa"])
        for r in rows:
            w.writerow([r[0]] + [f"{x:.4f}" for x in r[1:]])
        for d in positions_rows + decode_rows:
            w.writerow(d)
    with open(os.path.join(args.out, "attention.md"), "w") as fh:
        fh.write(f"Causal prefill, bf16, heads {args.heads}/{args.kv_heads}, head dim {args.head_dim}; "
                 f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}; ragd kernel {kernel}\n\n")
        fh.write("| tokens | ragd ms | ragd TFLOP/s | SDPA ms | SDPA TFLOP/s | ragd / SDPA |\n|---|---|---|---|---|---|\n")
        for r in rows:
            fh.write(f"| {r[0]} | {r[1]:.3f} | {r[2]:.1f} | {r[3]:.3f} | {r[4]:.1f} | {r[5]:.2f} |\n")
        if check is not None:
            fh.write(f"\nCheck: {args.check_tokens}-token causal prefill, max |ragd - SDPA (fp32)| = {check:.3e} "
                     f"(bound 2e-2)\n")
        if positions_rows:
            fh.write("\nThe same prefill as a 2-worker zigzag shard (explicit positions: the ring's kernel)\n\n"
                     "| tokens | ms | TFLOP/s |\n|---|---|---|\n")
            for d in positions_rows:
                fh.write(f"| {d[1]} | {d[6]} | {d[7]} |\n")
        if decode_rows:
            fh.write("\nPaged decode (split-KV), bf16 KV\n\n| batch | kv_len | us | GB/s of K+V |\n|---|---|---|---|\n")
            for d in decode_rows:
                fh.write(f"| {d[1]} | {d[2]} | {d[6]} | {d[7]} |\n")
    ok = proc.returncode == 0 and check is not None and check <= 2e-2
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
