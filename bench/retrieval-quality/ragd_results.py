#!/usr/bin/env python3
"""Turns `ragctl search --queries` output into the benchmark's results format.

Usage: ragd_results.py IN.jsonl OUT.jsonl [--prefix P]

ragctl names a chunk's document by its id at ingest: a file's path relative to the directory
given ("json.html"), or for a PDF page "<file>#page=<N>". The benchmark names HTML pages by their
path under the set's root ("library/json.html": --prefix library/) and PDF pages by file and page.
"""
import argparse
import json
import re
import sys

PAGE = re.compile(r"^(?P<doc>.*)#page=(?P<page>\d+)$")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("inp")
    p.add_argument("out")
    p.add_argument("--prefix", default="")
    a = p.parse_args()
    with open(a.inp) as f, open(a.out, "w") as o:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{a.inp}:{n}: {e}")
            ranked = []
            for h in r["ranked"]:
                m = PAGE.match(h["doc"])
                if m:
                    ranked.append({"doc": a.prefix + m["doc"], "page": int(m["page"])})
                else:
                    ranked.append({"doc": a.prefix + h["doc"]})
            o.write(json.dumps({"id": r["id"], "ranked": ranked}) + "\n")


if __name__ == "__main__":
    main()
