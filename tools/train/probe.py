#!/usr/bin/env python3
"""Teacher-forced exact match of a model on synthetic held-out episodes (test-split entities) of
a chosen distractor hardness, per question kind: where a model's passage selection breaks down.

    /usr/bin/python3 tools/train/probe.py --model models/ragd-qa [--episodes 300] [--passages 4]

Three sets, same seeds: the validation mix (60 % hard distractors), every distractor hard, and
every distractor hard including retrieval-like ones (same topic and quantity sentence as the gold
passage). An episode counts when greedy decoding would reproduce its answer.
"""
import argparse
import collections
import os
import random
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402
import train  # noqa: E402
from make_data import spaced  # noqa: E402
from rag_world import Pools, make_episode  # noqa: E402

SETS = [("validation mix", dict(hard_fraction=0.6)), ("all hard", dict(hard_fraction=1.0)),
        ("all hard, retrieval-like", dict(hard_fraction=1.0, retrieval_like=True))]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--ragctl", default="build/bin/ragctl")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--passages", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = llama.load(a.model)
    dev = train.Device("cpu")
    pools = Pools()
    print("| distractors | exact match | how many | when | where | who |\n|---|---:|---:|---:|---:|---:|")
    for name, kw in SETS:
        eps = [spaced(make_episode(random.Random(777000 + i), pools, "test", a.passages, **kw))
               for i in range(a.episodes)]
        data = train.encode_rows(a.ragctl, os.path.join(a.model, "tokenizer.json"), eps)
        right = collections.defaultdict(list)
        for e, hit in zip(eps, train.teacher_forced_hits(model, data, dev)):
            right[e["kind"]].append(hit)
        total = sum(sum(v) for v in right.values()) / len(data)
        cols = " | ".join(f"{100 * sum(right[k]) / max(1, len(right[k])):.1f} %" for k in ("how_many", "when", "where", "who"))
        print(f"| {name} | {100 * total:.1f} % | {cols} |", flush=True)


if __name__ == "__main__":
    main()
