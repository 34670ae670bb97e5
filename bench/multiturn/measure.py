#!/usr/bin/env python3
"""Gold-passage hit rate of a pipeline's retrieval over multi-turn conversations
(examples/qa_eval/multiturn.jsonl), asked through POST /v1/chat/completions with model =
"pipeline:<name>" on a running ragd, for each query rule:
  last       the last user message alone
  recent-N   the last N user messages, oldest first, joined by newlines (sent as one user message:
             the query the daemon's rule builds from N user turns, whatever its own N)
  daemon     the whole conversation as sent: the daemon's rule (rag_query.h), which must equal
             recent-kRagQueryUserTurns
Usage: measure.py URL [--pipeline default] [--mode lexical|dense|hybrid] [--json OUT]
"""
import argparse
import json
import sys
import urllib.request
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def ask(url, pipeline, messages, mode):
    body = {"model": "pipeline:" + pipeline, "messages": messages, "max_tokens": 1, "temperature": 0}
    if mode:
        body["retrieval_mode"] = mode
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        return [s["doc_id"] for s in json.load(r)["ragd"]["sources"]]


def joined(messages, user_turns):
    """One user message: the last user_turns user messages, oldest first, one per line."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    return [{"role": "user", "content": "\n".join(users[-user_turns:])}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--pipeline", default="default")
    ap.add_argument("--mode", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--set", default=str(ROOT / "examples/qa_eval/multiturn.jsonl"))
    a = ap.parse_args()
    convs = [json.loads(l) for l in open(a.set)]
    rules = [("last", 1), ("recent-2", 2), ("recent-3", 3), ("daemon", None)]
    hits = defaultdict(lambda: defaultdict(lambda: [0, 0, 0]))  # rule -> kind -> [top1, topk, n]
    for c in convs:
        for name, n in rules:
            got = ask(a.url, a.pipeline, c["messages"] if n is None else joined(c["messages"], n), a.mode)
            for kind in (c["kind"], "all"):
                h = hits[name][kind]
                h[0] += bool(got) and got[0] == c["gold"]
                h[1] += c["gold"] in got
                h[2] += 1
    kinds = ["topical", "pronoun", "chain", "switch", "all"]
    print("gold passage in the sources (top-k) / at rank 1, %d conversations, pipeline %s, mode %s"
          % (len(convs), a.pipeline, a.mode or "the pipeline's"))
    print("%-10s" % "rule" + "".join("%-18s" % ("%s (%d)" % (k, hits["last"][k][2])) for k in kinds))
    for name, _ in rules:
        row = "%-10s" % name
        for k in kinds:
            t1, tk, n = hits[name][k]
            row += "%-18s" % ("%5.1f %% / %5.1f %%" % (100.0 * tk / n, 100.0 * t1 / n))
        print(row)
    if a.json:
        json.dump({r: {k: {"topk": v[1] / v[2], "top1": v[0] / v[2], "n": v[2]} for k, v in d.items()}
                   for r, d in hits.items()}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
