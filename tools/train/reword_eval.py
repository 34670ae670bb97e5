#!/usr/bin/env python3
"""Rewrites the evaluation questions (who / when / where) in held-out wordings that the training
data never uses (rag_world.REWORDED_QUESTIONS): the same fact, the same gold passage and answer.
Writes both the reworded questions and the same questions in their original wording, so that exact
match can be compared question for question, and near-misses of them (the original wording with one
field — the topic noun, the place or the person — taken from another question: another fact, one
word or name apart; "changed" names the field), for the semantic cache's benchmark:

    python3 tools/train/reword_eval.py examples/qa_eval/questions.jsonl OUT_DIR
    -> OUT_DIR/original.jsonl, OUT_DIR/reworded.jsonl, OUT_DIR/near_miss.jsonl

How-many questions are left out (their wording is each topic's own). A question that matches no
base form is refused by line. Standard library only; deterministic.
"""
import json
import os
import re
import sys

from rag_world import QUESTIONS, REWORDED_QUESTIONS


def pattern(template):
    """A base form as a regular expression whose groups are its fields."""
    out, pos = "", 0
    for m in re.finditer(r"\{(\w+)\}", template):
        out += re.escape(template[pos:m.start()]) + f"(?P<{m.group(1)}>.+?)"
        pos = m.end()
    return re.compile("^" + out + re.escape(template[pos:]) + "$")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    base = [(k, pattern(t)) for k, t in QUESTIONS if t]
    forms = {}
    for k, t in REWORDED_QUESTIONS:
        forms.setdefault(k, []).append(t)
    original, reworded, fields_of = [], [], []
    with open(sys.argv[1], encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            q = json.loads(line)
            if q["kind"] not in forms:
                continue
            fields = next((m.groupdict() for k, p in base if k == q["kind"] for m in [p.match(q["question"])] if m), None)
            if fields is None:
                sys.exit(f"{sys.argv[1]}:{line_no}: question matches no base form of kind {q['kind']}: {q['question']}")
            choices = forms[q["kind"]]
            t = choices[len(reworded) % len(choices)]
            original.append(q)
            fields_of.append((q["kind"], fields))
            reworded.append(dict(q, question=t.format(**fields)))
    # Near-misses: each field of each question replaced by the next question's different value of it.
    templates = {k: [t for kk, t in QUESTIONS if kk == k and t] for k in forms}
    near = []
    for i, (q, (kind, fields)) in enumerate(zip(original, fields_of)):
        template = next(t for t in templates[kind] if pattern(t).match(q["question"]))
        for field in ("noun", "place", "person"):
            if field not in fields:
                continue
            other = next((f[field] for _, f in fields_of[i + 1:] + fields_of[:i] if field in f and f[field] != fields[field]),
                         None)
            if other is not None:
                near.append(dict(q, question=template.format(**dict(fields, **{field: other})), changed=field))
    os.makedirs(sys.argv[2], exist_ok=True)
    for name, rows in (("original", original), ("reworded", reworded), ("near_miss", near)):
        with open(os.path.join(sys.argv[2], name + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    print(f"{len(reworded)} questions reworded, {len(near)} near-misses -> {sys.argv[2]}")


if __name__ == "__main__":
    main()
