#!/usr/bin/env python3
"""Where the QA model's wrong answers come from, per question kind, from a `ragctl eval` report.

A wrong answer is either a string copied from one of the passages in the prompt (the model read
the wrong passage: a selection error) or a string found in none of them (it garbled what it
copied, typically a multi-token name never seen in training). Reads the run with the given
context and reuse (default: retrieved passages, no reuse).

  error_analysis.py --report data/eval/report.json [--questions examples/qa_eval/questions.jsonl]
                    [--corpus examples/qa_eval/corpus.jsonl] [--context retrieved|gold] [--reuse none]
"""
import argparse
import collections
import json
import sys

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", required=True)
    ap.add_argument("--questions", default="examples/qa_eval/questions.jsonl")
    ap.add_argument("--corpus", default="examples/qa_eval/corpus.jsonl")
    ap.add_argument("--context", default="retrieved")
    ap.add_argument("--reuse", default="none")
    a = ap.parse_args()
    corpus = {}
    with open(a.corpus) as fh:
        for line in fh:
            d = json.loads(line)
            corpus[d["id"]] = d["title"] + "\n" + d["text"]
    with open(a.questions) as fh:
        kinds = {q["id"]: q["kind"] for q in map(json.loads, fh)}
    report = json.load(open(a.report))
    runs = [r for r in report["runs"] if r["context"] == a.context and r["reuse"] == a.reuse]
    if not runs:
        sys.exit(f"no run with context {a.context} and reuse {a.reuse} in {a.report}")
    counts = collections.defaultdict(collections.Counter)
    for x in runs[0]["results"]:
        k = kinds.get(x["id"], "?")
        out = x["output"].strip()
        if x["exact_match"]:
            counts[k]["right"] += 1
        elif out and any(out in corpus.get(s, "") for s in x["sources"]):
            counts[k]["copied from a passage in the prompt"] += 1
        else:
            counts[k]["in no passage of the prompt"] += 1
    cols = ["right", "copied from a passage in the prompt", "in no passage of the prompt"]
    print(f"{a.report}: context {a.context}, reuse {a.reuse}\n")
    print("| kind | questions | " + " | ".join(cols) + " |")
    print("|---|---:|" + "---:|" * len(cols))
    for k in sorted(counts, key=lambda k: -sum(counts[k].values())):
        n = sum(counts[k].values())
        print(f"| {k} | {n} | " + " | ".join(f"{100 * counts[k][c] / n:.1f} %" for c in cols) + " |")


if __name__ == "__main__":
    main()
