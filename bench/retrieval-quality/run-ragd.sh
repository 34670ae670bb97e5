#!/usr/bin/env bash
# ragd on the retrieval-quality benchmark: each set ingested with `ragctl ingest` as a new user
# would (defaults: the QA model's tokenizer, the shipped term vectors models/ragd-termvec, Flat
# index), then every question searched with `ragctl search --queries` in each mode (auto = the
# default: hybrid with term vectors, lexical with the hashing embedder; lexical, dense, hybrid) and
# scored with score.py, beside the Xapian anchor (run-anchor.sh). The former default embedder:
# RQ_INGEST_ARGS="--embedder hashing".
# Usage: run-ragd.sh [BUILD] [OUT]      (BUILD default build, OUT default BUILD/retrieval-quality)
# Knobs: RQ_SETS ("python-library bash-manual apache-manual"), RQ_MODES ("auto lexical dense hybrid"), RQ_K (30: chunks, several per page; the scorer ranks pages by their first chunk),
#        RQ_INGEST_ARGS (extra `ragctl ingest` options, e.g. "--chunk-tokens 128").
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "${1:-$ROOT/build}" && pwd)
OUT=${2:-$BUILD/retrieval-quality}
MODEL=${RQ_MODEL:-$ROOT/models/ragd-qa}
SETS=${RQ_SETS:-python-library bash-manual apache-manual}
MODES=${RQ_MODES:-auto lexical dense hybrid}
K=${RQ_K:-30}
read -r -a INGEST_ARGS <<< "${RQ_INGEST_ARGS:-}"
mkdir -p "$OUT"
"$HERE/fetch-docs.sh" > /dev/null

for set in $SETS; do
  case $set in
    python-library) src=/usr/share/doc/python3.11/html/library; prefix=library/ ;;
    bash-manual) src=/usr/share/doc/bash/bashref.pdf; prefix="" ;;
    apache-manual) src=/usr/share/doc/apache2-doc/manual/en; prefix="" ;;
    *) echo "run-ragd: unknown set $set" >&2; exit 2 ;;
  esac
  data=$OUT/$set.data
  rm -rf "$data"
  t0=$(date +%s.%N)
  "$BUILD/bin/ragctl" ingest "$src" --data "$data" --model "$MODEL" -q "${INGEST_ARGS[@]}" > "$OUT/$set.ingest.log" 2>&1 ||
    { cat "$OUT/$set.ingest.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$set: ingested in $(python3 -c "print(round($t1 - $t0, 1))") s ($(du -sh "$data" | cut -f1) on disk)"
  for mode in $MODES; do
    "$BUILD/bin/ragctl" search --data "$data" --model "$MODEL" --queries "$HERE/questions-$set.jsonl" \
      --mode "$mode" -k "$K" --out "$OUT/$set.ragd-$mode.raw.jsonl"
    python3 "$HERE/ragd_results.py" "$OUT/$set.ragd-$mode.raw.jsonl" "$OUT/$set.ragd-$mode.jsonl" --prefix "$prefix"
    python3 "$HERE/score.py" "$HERE/questions-$set.jsonl" "$OUT/$set.ragd-$mode.jsonl" --name "ragd-$mode" \
      --out "$OUT/$set.ragd-$mode.summary.json"
  done
done
