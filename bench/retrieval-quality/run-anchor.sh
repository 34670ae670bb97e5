#!/usr/bin/env bash
# The anchor of the retrieval-quality benchmark end to end: installs the document packages when
# missing (fetch-docs.sh), runs Xapian stand-alone (anchor_xapian.py, both variants) on both sets
# and scores each run (score.py). Rankings and summaries go to OUT (default: results/ beside this
# script, where the measured ones are committed; the anchor is deterministic, so a rerun on the
# same package versions rewrites them unchanged). Seconds of CPU on one core.
# Usage: run-anchor.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-results}"
mkdir -p "$out"

./fetch-docs.sh
./check-questions.py

# python3-xapian is a module of Debian's interpreter, which may not be the first python3 on PATH.
py=/usr/bin/python3
for set in python-library bash-manual apache-manual; do
  for variant in defaults probe; do
    "$py" anchor_xapian.py "$set" --variant "$variant" --out "$out/$set.xapian-$variant.jsonl"
    "$py" score.py "questions-$set.jsonl" "$out/$set.xapian-$variant.jsonl" --name "xapian-$variant" \
      --out "$out/$set.xapian-$variant.summary.json"
  done
done
