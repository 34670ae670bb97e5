#!/usr/bin/env python3
"""Exports the weights of a training checkpoint (train.py's ckpt.pt) as a model directory
(config.json + bf16 model.safetensors), e.g. to ship the latest state of a run stopped early.

    /usr/bin/python3 tools/train/export_ckpt.py --run data/train/run --out DIR
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, help="run folder with ckpt.pt and best/config.json")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    st = torch.load(os.path.join(args.run, "ckpt.pt"))
    with open(os.path.join(args.run, "best", "config.json")) as f:
        cfg = llama.Config.from_hf(json.load(f))
    m = llama.Llama(cfg)
    m.load_state_dict(st["model"], strict=True)
    llama.export(m, args.out)
    print(f"exported step {st['step']} ({st['elapsed'] / 60:.1f} min trained, stage {st.get('stage', '?')}) -> {args.out}")


if __name__ == "__main__":
    main()
