#!/usr/bin/env python3
"""Writes multiturn.jsonl: conversations over the QA corpus (corpus.jsonl, questions.jsonl) whose
last user turn is asked of a RAG pipeline. Deterministic (seeded); rerun to regenerate.

Each line: {"id", "kind", "gold", "messages": [{"role", "content"}, ...]}; the gold document is
what a search for the last turn should find. Kinds:
  topical   a second question about the same document with its place replaced by "there"
            ("How many days after rain did chanterelles appear there?")
  pronoun   a follow-up naming nothing ("When did that study begin?", "Who led that work?")
  chain     two such follow-ups in a row: the referent is three user turns back
  switch    a self-contained question about another document (the control: earlier turns are
            about something else)
"""
import json
import random
import re
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
corpus = {d["id"]: d for d in map(json.loads, open(HERE / "corpus.jsonl"))}
questions = [json.loads(l) for l in open(HERE / "questions.jsonl")]
by_doc = defaultdict(list)
for q in questions:
    by_doc[q["gold"]].append(q)
rng = random.Random(50)


def place(doc):
    return doc["title"].split(" at ", 1)[1]


def year(doc):
    return re.search(r"\b(1[5-9]\d\d|20\d\d)\b", doc["text"]).group(1)


def person(doc):
    m = re.search(r"(?:by|that) ([A-Z][a-z]+ [A-Z][a-z]+)", doc["text"])
    return m.group(1) if m else "a researcher"


def without_place(question, where):
    for prep in ("at ", "of ", "in "):
        question = question.replace(prep + where, "there")
    return question


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


convs = []
multi = sorted(g for g, qs in by_doc.items() if len(qs) >= 2)
for g in multi:
    qs = by_doc[g]
    first = next((q for q in qs if place(corpus[g]) in q["question"]), None)
    if first is None:
        continue
    second = next(q for q in qs if q is not first)
    convs.append({"kind": "topical", "gold": g,
                  "messages": [user(first["question"]), assistant(first["answer"]),
                               user(without_place(second["question"], place(corpus[g])))]})

named = [q for q in questions if place(corpus[q["gold"]]) in q["question"]]
rng.shuffle(named)
follow_ups = [("When did that study begin?", year), ("Who led that work?", person)]
for q in named[:80]:
    doc = corpus[q["gold"]]
    text, _ = follow_ups[len(convs) % 2]
    convs.append({"kind": "pronoun", "gold": q["gold"],
                  "messages": [user(q["question"]), assistant(q["answer"]), user(text)]})
for q in named[80:120]:
    doc = corpus[q["gold"]]
    (t1, a1), (t2, _) = follow_ups if len(convs) % 2 else follow_ups[::-1]
    convs.append({"kind": "chain", "gold": q["gold"],
                  "messages": [user(q["question"]), assistant(q["answer"]), user(t1), assistant(a1(doc)), user(t2)]})
for a, b in zip(named[120:200], named[200:280]):
    if a["gold"] == b["gold"]:
        continue
    convs.append({"kind": "switch", "gold": b["gold"],
                  "messages": [user(a["question"]), assistant(a["answer"]), user(b["question"])]})

with open(HERE / "multiturn.jsonl", "w") as f:
    for i, c in enumerate(convs):
        f.write(json.dumps({"id": "m%03d" % i, **c}) + "\n")
counts = defaultdict(int)
for c in convs:
    counts[c["kind"]] += 1
print("wrote", len(convs), "conversations:", dict(counts))
