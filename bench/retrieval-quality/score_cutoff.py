#!/usr/bin/env python3
"""What a pipeline's `[retriever] min_score_ratio` costs retrieval: the share of questions whose
right page is still among the passages a run would get — the top K chunks of `ragctl search
--queries` output, less those scoring below RATIO x the first chunk's score (the first always stays) —
for each ratio, with the mean number of passages kept.

Usage: score_cutoff.py QUESTIONS.jsonl RAW.jsonl [--prefix P] [--k 4,5] [--ratios 0,0.5,0.6,0.7,0.8]

RAW.jsonl: `ragctl search --queries ... --out RAW.jsonl` (chunks with "doc", "score"); QUESTIONS.jsonl
as score.py reads them ("doc", "docs" for HTML sets, "page" / "pages" for PDF sets); --prefix as
ragd_results.py.
Exit status: 0, or 2 on malformed input (the file and line named).
"""
import argparse
import json
import re
import sys

PAGE = re.compile(r"^(?P<doc>.*)#page=(?P<page>\d+)$")


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    sys.exit(f"{path}:{n}: not JSON: {e}")


def is_right(hit, q, prefix):
    m = PAGE.match(hit["doc"])
    if m:
        pages = q.get("pages") or [q.get("page")]
        return m.group("doc") == q["doc"] and int(m.group("page")) in pages
    return prefix + hit["doc"] in q.get("docs", [q["doc"]])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("questions")
    p.add_argument("raw")
    p.add_argument("--prefix", default="")
    p.add_argument("--k", default="4,5")
    p.add_argument("--ratios", default="0,0.5,0.6,0.7,0.8")
    a = p.parse_args()
    questions = {q["id"]: q for q in read_jsonl(a.questions)}
    rows = list(read_jsonl(a.raw))
    for r in rows:
        if r.get("id") not in questions or not r.get("ranked"):
            sys.exit(f"{a.raw}: line for id {r.get('id')!r} has no question or no ranked chunks")
    for k in (int(x) for x in a.k.split(",")):
        cells = []
        for ratio in (float(x) for x in a.ratios.split(",")):
            hits = kept = 0
            for r in rows:
                top = r["ranked"][:k]
                floor = ratio * top[0]["score"]
                keep = [h for i, h in enumerate(top) if i == 0 or ratio <= 0 or h["score"] >= floor]
                kept += len(keep)
                hits += any(is_right(h, questions[r["id"]], a.prefix) for h in keep)
            cells.append(f"ratio {ratio:.1f}: right page kept {hits / len(rows):.3f}, passages {kept / len(rows):.2f}")
        print(f"k={k}  " + " | ".join(cells))


if __name__ == "__main__":
    main()
