#!/usr/bin/env bash
# Ingest at scale: N synthetic passages (default 100,000) into a fresh data directory with a chosen
# embedder; reports wall time, CPU time, passages/s and peak memory (GNU time), and the corpus
# stats.
#
#   scripts/ingest-bench.sh [BUILD_DIR]
#
# Passages are sentences of the QA corpus (examples/qa_eval/corpus.jsonl) recombined at random
# (seeded), about INGEST_WORDS words each, one document per passage, so every passage is one chunk
# of at most INGEST_CHUNK tokens. Environment (defaults in brackets): INGEST_N [100000],
# INGEST_WORDS [60], INGEST_CHUNK [128], INGEST_EMBEDDER [bge-small: a random-weight encoder made
# by ragctl make-model; "hashing" for the hashing embedder], INGEST_LAYERS [the preset's; 6 with
# bge-small is all-MiniLM-L6-v2's shape], INGEST_DIR [data/ingest-bench],
# INGEST_NICE [0] (a nice level, for a run on a shared machine: then compare CPU time, not wall).
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
N=${INGEST_N:-100000}
WORDS=${INGEST_WORDS:-60}
CHUNK=${INGEST_CHUNK:-128}
EMB=${INGEST_EMBEDDER:-bge-small}
DIR=${INGEST_DIR:-data/ingest-bench}
NICE=${INGEST_NICE:-0}
LAYERS=${INGEST_LAYERS:-0}
mkdir -p "$DIR"
python3 - "$DIR/passages.jsonl" "$N" "$WORDS" <<'PY'
import json, random, sys
out, n, words = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sents = []
for line in open("examples/qa_eval/corpus.jsonl"):
    t = json.loads(line)["text"]
    sents += [s.strip() + "." for s in t.split(".") if s.strip()]
rng = random.Random(7)
with open(out, "w") as f:
    for i in range(n):
        body = []
        while sum(len(s.split()) for s in body) < words:
            body.append(rng.choice(sents))
        f.write(json.dumps({"id": f"p{i:06d}", "title": "", "text": " ".join(body)}) + "\n")
PY
args=()
if [[ "$EMB" != hashing ]]; then
  ED="$DIR/embedder-$EMB-L$LAYERS"
  [[ -f "$ED/config.json" ]] || "$BIN/ragctl" make-model --preset "$EMB" --layers "$LAYERS" --out "$ED" --seed 1
  args+=(--embedder model --embedder-model "$ED")
fi
rm -rf "$DIR/data"
nice -n "$NICE" /usr/bin/time -f "ingest: wall %e s, user %U s, system %S s, max RSS %M KB" \
  "$BIN/ragctl" ingest "$DIR/passages.jsonl" --data "$DIR/data" --model models/ragd-qa --chunk-tokens "$CHUNK" \
  "${args[@]}" 2>&1 | tail -4
