#!/usr/bin/env python3
"""Writes a question set from the same world as the held-out evaluation set (examples/qa_eval) but
with another seed: its own corpus and questions, for fitting what must not be tuned on the
held-out questions (the adaptive pipeline's profile: `ragctl eval --fit-adapt`).

    python3 tools/train/make_fit_set.py --out /tmp/qa_fit --seed 20261201

Files under --out: corpus.jsonl (for `ragctl ingest`) and questions.jsonl, as make_data.py
--eval-dir writes them (ids prefixed "fit-"). The seed of the committed held-out set (20261123) is refused.
Standard library only; deterministic for a seed.
"""
import argparse
import os
import random

from make_data import test_corpus, write_jsonl
from rag_world import Pools, _answers_question, make_question

HELD_OUT_SEED = 20261123


def fit_set(pools, seed, docs, questions):
    """As make_data.eval_set (documents from the test pools, each question answered by exactly one
    document, kinds in turn), except that a (document, kind) pair another document also answers
    is skipped for the next one instead of being drawn again."""
    rng = random.Random(seed)
    corpus = test_corpus(rng, pools, docs, "fit")
    qs, asked, kinds, turn = [], set(), ["who", "when", "where", "how_many"], 0
    while len(qs) < questions and turn < 50 * questions:
        gold, kind = corpus[turn % docs], kinds[turn % 4] if turn < docs else rng.choice(kinds)
        if turn >= docs:
            gold = rng.choice(corpus)
        turn += 1
        if (gold["id"], kind) in asked or any(_answers_question(o, gold, kind) for o in corpus if o is not gold):
            continue
        asked.add((gold["id"], kind))
        k, q, a = make_question(rng, gold, kind)
        qs.append(dict(id=f"fit-q{len(qs):04d}", question=q, answer=a, kind=k, gold=gold["id"]))
    return [dict(id=p["id"], title=p["title"], text=p["text"]) for p in corpus], qs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--docs", type=int, default=320)
    ap.add_argument("--questions", type=int, default=400)
    args = ap.parse_args()
    if args.seed == HELD_OUT_SEED:
        ap.error(f"seed {HELD_OUT_SEED} is the held-out set's")
    os.makedirs(args.out, exist_ok=True)
    corpus, qs = fit_set(Pools(), args.seed, args.docs, args.questions)
    write_jsonl(os.path.join(args.out, "corpus.jsonl"), corpus)
    write_jsonl(os.path.join(args.out, "questions.jsonl"), qs)
    print(f"fit set: {len(corpus)} documents, {len(qs)} questions -> {args.out}")


if __name__ == "__main__":
    main()
