#!/usr/bin/env python3
"""What the real retriever returns for each request of a bench workload, for `ragctl simulate --retrieved`.

  bench/sim/retrieved.py WORKLOAD.jsonl DATA_DIR [TOP_K [RAGCTL [SEP_TOKENS]]] > RETRIEVED.jsonl

For each line of WORKLOAD.jsonl (`ragctl bench --workload` format) it asks `ragctl search QUERY -k
TOP_K --data DATA_DIR --json` (the corpus the daemon serves, the same embedder and index; the
pipeline's top_k, default 4) and writes one line per request, in the workload's order:
  {"docs": [[CHUNK_ID, TOKENS], ...]}
the retrieved chunks (the top TOP_K by score, ties by chunk id, as the executor ranks them) in
prompt order (by chunk id: the executor sorts them so that the same set gives the same path) with
their token counts, each plus SEP_TOKENS (default 2: the default pipeline's
separator "\n\n", which the prompt builder appends to every document's segment). The simulator then builds each request's knowledge-tree path
from these documents instead of the generator's topic list: the real retriever's variance (another
topic's document, a missing one, another order) is in the workload, not estimated.
"""
import json
import subprocess
import sys


def main():
    workload, data = sys.argv[1], sys.argv[2]
    k = int(sys.argv[3]) if len(sys.argv) > 3 else 4
    ragctl = sys.argv[4] if len(sys.argv) > 4 else "build/bin/ragctl"
    sep = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    for line in open(workload):
        line = line.strip()
        if not line:
            continue
        query = json.loads(line)["query"]
        out = subprocess.run([ragctl, "search", query, "-k", str(k), "--data", data, "--json", "--snippet", "0"],
                             check=True, capture_output=True, text=True).stdout
        hits = json.loads(out)["hits"]
        hits.sort(key=lambda h: (-h["score"], h["chunk_id"]))
        hits = sorted(hits[:k], key=lambda h: h["chunk_id"])
        print(json.dumps({"docs": [[h["chunk_id"], h["token_end"] - h["token_begin"] + sep] for h in hits]}))


if __name__ == "__main__":
    main()
