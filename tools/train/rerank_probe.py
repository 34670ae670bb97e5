#!/usr/bin/env python3
"""How well the QA model itself would rerank retrieved passages: for every question of a
`ragctl eval` report (retrieved context, reuse none), each retrieved passage is scored by
log P(question | passage) — the question's tokens after a one-passage prompt of the default
pipeline, as `ragctl encode-episodes` lays it out (the UPR reranking of Sachan et al., 2022) — and
the top-scored passage is compared with the gold one.

    /usr/bin/python3 tools/train/rerank_probe.py --model models/ragd-qa --report data/eval/report.json
"""
import argparse
import collections
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import llama  # noqa: E402
import train  # noqa: E402


def encode(ragctl, tokenizer, rows):
    return [[int(t) for t in ids] for ids, _ in train.encode_rows(ragctl, tokenizer, rows)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--questions", default="examples/qa_eval/questions.jsonl")
    ap.add_argument("--corpus", default="examples/qa_eval/corpus.jsonl")
    ap.add_argument("--ragctl", default="build/bin/ragctl")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with open(a.report) as f:
        run = next(r for r in json.load(f)["runs"] if r["context"] == "retrieved" and r["reuse"] == "none")
    corpus = {d["id"]: d["text"] for d in map(json.loads, open(a.corpus))}
    gold = {q["id"]: q["gold"] for q in map(json.loads, open(a.questions))}
    question = {q["id"]: q["question"] for q in map(json.loads, open(a.questions))}
    pairs = [(x["id"], s) for x in run["results"] for s in x["sources"]]
    tok = os.path.join(a.model, "tokenizer.json")
    with_q = encode(a.ragctl, tok, [dict(passages=[corpus[s]], question=question[i], answer=" x") for i, s in pairs])
    without = encode(a.ragctl, tok, [dict(passages=[corpus[s]], question="", answer=" x") for i, s in pairs])
    model = llama.load(a.model)
    scores = collections.defaultdict(list)
    with torch.no_grad():
        for (qid, src), x, y in zip(pairs, with_q, without):
            p = 0  # the question's tokens: what the prompt without it lacks
            while p < len(y) and x[p] == y[p]:
                p += 1
            s = 0
            while s < len(y) - p and x[-1 - s] == y[-1 - s]:
                s += 1
            q0, q1 = p, len(x) - s
            lp = F.log_softmax(model(torch.tensor([x[:q1]], dtype=torch.long))[0].float(), -1)
            score = lp[q0 - 1:q1 - 1].gather(1, torch.tensor(x[q0:q1], dtype=torch.long)[:, None]).sum().item()
            scores[qid].append((score, src == gold[qid]))
    n = len(scores)
    among = sum(any(g for _, g in v) for v in scores.values()) / n
    by_retrieval = sum(v[0][1] for v in scores.values()) / n
    by_model = sum(max(v)[1] for v in scores.values()) / n
    print(f"{n} questions, {len(run['results'][0]['sources'])} retrieved passages each: gold among them {100 * among:.1f} %, "
          f"first by retrieval {100 * by_retrieval:.1f} %, first by log P(question | passage) {100 * by_model:.1f} %")


if __name__ == "__main__":
    main()
