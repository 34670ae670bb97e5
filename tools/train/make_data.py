#!/usr/bin/env python3
"""Writes the QA model's data: tokenizer text, curriculum training episodes, held-out validation
episodes, and the held-out evaluation set (a corpus to ingest plus questions with gold answers).

    python3 tools/train/make_data.py --out data/train --seed 1

Files under --out:
  tokenizer_text.txt       training-split passages, questions and answers (for the BPE tokenizer)
  stage{0,1,2}.jsonl       training episodes, easy to hard (passages per episode, hard distractors)
  val.jsonl                held-out episodes (test-split entities) in the stage-2 format
and with --eval-dir DIR (the committed evaluation set):
  DIR/corpus.jsonl         {"id", "title", "text"} documents for `ragctl ingest`
  DIR/questions.jsonl      {"id", "question", "answer", "kind", "gold"} (gold = document id)
  DIR/quote_questions.jsonl  the same for quotation questions (the answer is the gold document's
                           whole text): the copy-heavy workload of speculative decoding

Standard library only; deterministic for a seed.
"""
import argparse
import json
import os
import random

from rag_world import (QUESTIONS, QUOTE_QUESTIONS, VARIED_QUESTIONS, Pools, _answers_question, make_episode, make_passage,
                       make_question)

SYSTEM_TEXT = "You are a helpful assistant. Answer the question using the context.\nContext:\nQuestion: \n"

# (passages per episode range, fraction of hard distractors, episodes)
STAGES = [((1, 2), 0.0, 20000), ((2, 4), 0.3, 40000), ((3, 5), 0.6, 80000)]


def spaced(episode):
    """The answer as the model emits it after the chat template: with a leading space, so that every
    answer token is a token of the passage it is copied from (" Chian" and "Chian" are different
    tokens). Scoring ignores surrounding whitespace."""
    episode["answer"] = " " + episode["answer"]
    return episode


def pick_forms(rng, forms, quote_fraction):
    """The question forms of one question: quotation with probability quote_fraction, else `forms`."""
    return QUOTE_QUESTIONS if quote_fraction > 0 and rng.random() < quote_fraction else forms


def add_turns(rng, episode, passages, turns, forms=QUESTIONS, quote_fraction=0.0):
    """Up to turns - 1 follow-up questions about the episode's passages (each answered by exactly
    one of them): more answer tokens per context token, and questions about different passages of
    the same context."""
    follow, asked = [], {episode["answer"]}
    for _ in range(8 * turns):
        if len(follow) >= turns - 1:
            break
        p = rng.choice(passages)
        kind, q, a = make_question(rng, p, forms=pick_forms(rng, forms, quote_fraction))
        if " " + a in asked or any(_answers_question(o, p, kind) for o in passages if o is not p):
            continue
        asked.add(" " + a)
        follow.append({"question": q, "answer": " " + a})
    if follow:
        episode["turns"] = follow
    return episode


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def test_corpus(rng, pools, docs, id_prefix):
    """`docs` passages from the test pools, one per place (a person recurs in about a third), with
    ids "<id_prefix>-NNNN"."""
    corpus, used_places = [], set()
    while len(corpus) < docs:
        person = corpus[rng.randrange(len(corpus))]["person"] if corpus and rng.random() < 0.35 else None
        p = make_passage(rng, pools, "test", person=person)
        if p["place"] in used_places:
            continue
        used_places.add(p["place"])
        p["id"] = f"{id_prefix}-{len(corpus):04d}"
        corpus.append(p)
    return corpus


def eval_set(pools, seed, docs=320, questions=400):
    """Documents from the test pools (their facts too); each question has exactly one answering
    document."""
    rng = random.Random(seed)
    corpus = test_corpus(rng, pools, docs, "qa")
    qs, asked = [], set()
    kinds = ["who", "when", "where", "how_many"]
    while len(qs) < questions:
        gold = corpus[len(qs) % docs] if len(qs) < docs else rng.choice(corpus)
        kind = kinds[len(qs) % 4] if len(qs) < docs else rng.choice(kinds)
        if (gold["id"], kind) in asked:
            continue
        if any(_answers_question(o, gold, kind) for o in corpus if o is not gold):
            continue
        asked.add((gold["id"], kind))
        k, q, a = make_question(rng, gold, kind)
        qs.append(dict(id=f"q{len(qs):04d}", question=q, answer=a, kind=k, gold=gold["id"]))
    return corpus, qs


def quote_eval_set(corpus, seed, questions=100):
    """Quotation questions over the evaluation corpus (eval_set's documents, in order, skipping one
    whose noun and place another document shares): the answer is the gold document's whole text."""
    rng, qs = random.Random(seed), []
    for gold in corpus:
        if len(qs) == questions:
            break
        if any(_answers_question(o, gold, "quote") for o in corpus if o is not gold):
            continue
        k, q, a = make_question(rng, gold, "quote", forms=QUOTE_QUESTIONS)
        qs.append(dict(id=f"quote{len(qs):03d}", question=q, answer=a, kind=k, gold=gold["id"]))
    return qs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply episode counts (default 1)")
    ap.add_argument("--eval-dir", help="also write the evaluation corpus and questions here")
    ap.add_argument("--turns", type=int, default=1,
                    help="questions per training episode: the first in the pipeline's prompt, the rest as follow-up "
                         "chat turns (default 1)")
    ap.add_argument("--hard", action="store_true",
                    help="every stage as the hardest one: 4-5 passages, all distractors hard, including the ones a "
                         "retriever ranks next to the gold passage (same topic and quantity sentence)")
    ap.add_argument("--retrieval-like", action="store_true",
                    help="hard distractors may also be what a retriever ranks next to the gold passage (same topic "
                         "and quantity sentence); implied by --hard")
    ap.add_argument("--fresh-names", action="store_true",
                    help="make up new training names and places for every episode instead of drawing them from the "
                         "fixed training pools (the test pools and the evaluation set are unchanged)")
    ap.add_argument("--question-forms", choices=["base", "varied"], default="base",
                    help="the wordings of the training questions: base (the committed model's) or varied (many more "
                         "templates, word orders and paraphrased verbs; the evaluation set keeps the base ones)")
    ap.add_argument("--quote-fraction", type=float, default=0.0,
                    help="fraction of training questions that ask to quote the gold passage whole (the answer is the "
                         "passage's text; default 0, the committed QA model's data)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    forms = VARIED_QUESTIONS if args.question_forms == "varied" else QUESTIONS
    pools = Pools(fresh_train=args.fresh_names)
    rng = random.Random(args.seed)
    tok_lines = [SYSTEM_TEXT] * 50
    stages = [((4, 5), 1.0, count) for _, _, count in STAGES] if args.hard else STAGES
    for s, ((lo, hi), hard, count) in enumerate(stages):
        rows = []
        for _ in range(int(count * args.scale)):
            ep = spaced(make_episode(rng, pools, "train", rng.randint(lo, hi), hard, keep_passages=args.turns > 1,
                                     retrieval_like=args.hard or args.retrieval_like,
                                     forms=pick_forms(rng, forms, args.quote_fraction)))
            if args.turns > 1:
                add_turns(rng, ep, ep.pop("passage_facts"), args.turns, forms, args.quote_fraction)
            rows.append(ep)
        write_jsonl(os.path.join(args.out, f"stage{s}.jsonl"), rows)
        if s == 2:
            for r in rows[:6000]:
                tok_lines += r["passages"] + [r["question"], r["answer"]]
    write_jsonl(os.path.join(args.out, "val.jsonl"),
                [spaced(make_episode(random.Random(args.seed * 1000 + i), pools, "test", 4, 0.6, forms=forms)) for i in range(400)])
    with open(os.path.join(args.out, "tokenizer_text.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(tok_lines) + "\n")
    if args.eval_dir:
        os.makedirs(args.eval_dir, exist_ok=True)
        corpus, qs = eval_set(pools, seed=20261123)
        write_jsonl(os.path.join(args.eval_dir, "corpus.jsonl"), [dict(id=p["id"], title=p["title"], text=p["text"]) for p in corpus])
        write_jsonl(os.path.join(args.eval_dir, "questions.jsonl"), qs)
        write_jsonl(os.path.join(args.eval_dir, "quote_questions.jsonl"), quote_eval_set(corpus, seed=20261124))
        print(f"eval set: {len(corpus)} documents, {len(qs)} questions -> {args.eval_dir}")
    print(f"wrote training data under {args.out}")


if __name__ == "__main__":
    main()
