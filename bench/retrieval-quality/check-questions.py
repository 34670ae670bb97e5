#!/usr/bin/env python3
"""Checks the question sets against the installed documents: every question's doc exists under
the set's root and matches its glob, PDF pages lie within the file, ids are unique, and each set
has its questions. Usage: check-questions.py [--sets sets.json]. Exit 1 naming each problem."""
import argparse
import fnmatch
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def matches(doc, pattern):
    """fnmatch, with a leading "**/" also matching pages at the root (as glob's recursive "**")."""
    if pattern.startswith("**/") and fnmatch.fnmatch(doc, pattern[3:]):
        return True
    return fnmatch.fnmatch(doc, pattern)


def pdf_page_count(path):
    out = subprocess.run(["pdfinfo", path], check=True, capture_output=True, text=True).stdout
    return next(int(l.split()[1]) for l in out.splitlines() if l.startswith("Pages:"))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sets", default=os.path.join(HERE, "sets.json"))
    args = ap.parse_args(argv)
    with open(args.sets, encoding="utf-8") as f:
        sets = json.load(f)
    problems = []
    for name, s in sets.items():
        qpath = os.path.join(os.path.dirname(os.path.abspath(args.sets)), s["questions"])
        ids, docs, counts, n = set(), set(), {}, 0
        with open(qpath, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                where = f"{s['questions']}:{line_no}"
                q = json.loads(line)
                n += 1
                docs.add(q["doc"])
                if q["id"] in ids:
                    problems.append(f"{where}: id {q['id']} repeated")
                ids.add(q["id"])
                accepted = q.get("docs", [q["doc"]])
                if accepted[0] != q["doc"]:
                    problems.append(f"{where}: docs must start with doc {q['doc']}")
                missing = False
                for d in accepted:
                    if not matches(d, s["glob"]):
                        problems.append(f"{where}: doc {d} does not match {s['glob']}")
                    if not os.path.isfile(os.path.join(s["root"], d)):
                        problems.append(f"{where}: {os.path.join(s['root'], d)} missing (run fetch-docs.sh)")
                        missing = True
                if missing:
                    continue
                path = os.path.join(s["root"], q["doc"])
                if s["kind"] == "pdf":
                    if path not in counts:
                        counts[path] = pdf_page_count(path)
                    pages = q.get("pages", [q.get("page")])
                    if q.get("page") not in pages or not all(
                            isinstance(p, int) and 1 <= p <= counts[path] for p in pages):
                        problems.append(f"{where}: pages {pages} not within 1..{counts[path]}")
                elif "page" in q or "pages" in q:
                    problems.append(f"{where}: page given for an HTML set")
                if s["kind"] == "pdf" and "docs" in q:
                    problems.append(f"{where}: docs given for a PDF set (list pages)")
        print(f"{name}: {n} questions on {len(docs)} documents")
    for p in problems:
        print(f"check-questions.py: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
