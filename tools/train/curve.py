#!/usr/bin/env python3
"""Prints the training curve of a run (log.jsonl written by train.py) as a Markdown table, for the
model card and docs/benchmarks.md.

    python3 tools/train/curve.py models/ragd-qa/training_log.jsonl [--every 3]
"""
import argparse
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("log")
    ap.add_argument("--every", type=int, default=1, help="print every Nth evaluation (the last always)")
    args = ap.parse_args()
    rows = [json.loads(line) for line in open(args.log) if line.strip()]
    print("| minutes | step | answer loss | context loss | held-out EM (teacher-forced, 200 episodes) |")
    print("|---:|---:|---:|---:|---:|")
    for i, r in enumerate(rows):
        if i % args.every and i != len(rows) - 1:
            continue
        print(f"| {r['minutes']:.1f} | {r['step']} | {r['answer_loss']:.3f} | {r['context_loss']:.3f} | "
              f"{100 * r['held_out_em']:.1f} % |")


if __name__ == "__main__":
    main()
