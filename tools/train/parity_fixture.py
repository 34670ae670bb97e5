#!/usr/bin/env python3
"""Writes expected logits of a model directory, computed by the PyTorch reference (llama.py), for
ragd's parity test (tests/engine_io/qa_model_parity_test.cpp).

    /usr/bin/python3 tools/train/parity_fixture.py --model models/ragd-qa --out FILE

Prompts: RAG prompts of the evaluation questions, tokenized exactly as served (by `ragctl
encode-episodes`, whose output this reads), plus one prompt of over 1,000 tokens made by
concatenating several of them. Rows: every 61st position and the last one, full vocabulary, fp32.

Format (little-endian): "RAGDLOG1" | u32 prompts | u32 vocab | per prompt: u32 n, i32 ids[n],
u32 rows, per row: u32 position, f32 logits[vocab].
"""
import argparse
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402
from train import encode_file  # noqa: E402


def prompts_from(model_dir, ragctl, episodes_jsonl):
    eps = encode_file(ragctl, os.path.join(model_dir, "tokenizer.json"), episodes_jsonl)
    short = [list(map(int, ids[:spans[0][0]])) for ids, spans in eps[:3]]
    long = []
    for ids, spans in eps[3:]:
        long += list(map(int, ids[:spans[0][0]]))
        if len(long) > 1100:
            break
    return short + [long[:1100]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ragctl", default="build/bin/ragctl")
    ap.add_argument("--episodes", default="tools/train/parity_episodes.jsonl")
    args = ap.parse_args()
    torch.set_num_threads(2)
    m = llama.load(args.model)
    prompts = prompts_from(args.model, args.ragctl, args.episodes)
    vocab = m.c.vocab_size
    blob = bytearray(b"RAGDLOG1" + struct.pack("<II", len(prompts), vocab))
    with torch.no_grad():
        for ids in prompts:
            logits = m(torch.tensor([ids]))[0]
            rows = sorted(set(range(0, len(ids), 61)) | {len(ids) - 1})
            blob += struct.pack("<I", len(ids)) + struct.pack(f"<{len(ids)}i", *ids) + struct.pack("<I", len(rows))
            for r in rows:
                blob += struct.pack("<I", r) + logits[r].float().numpy().astype("<f4").tobytes()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "wb") as f:
        f.write(blob)
    print(f"parity fixture: {len(prompts)} prompts ({', '.join(str(len(p)) for p in prompts)} tokens), "
          f"{len(blob) / 1e3:.0f} KB -> {args.out}")


if __name__ == "__main__":
    main()
