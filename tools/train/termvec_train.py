#!/usr/bin/python3
"""Trains the term-vector embedder: a vector per stemmed term, learned so that a query's pooled
vector lands near its passage's (termvec_data.py's pairs).

Usage: termvec_train.py PAIRS.jsonl --out DIR [--dim 256] [--epochs 8] [--batch 512]
                        [--min-df 3] [--max-vocab 60000] [--seed 1]

The model. A text's terms are what ragd's lexical index generates (Xapian's TermGenerator, the
English stemmer, STEM_ALL; no stopword list: the weights learn them); its vector is

    v(text) = normalise( sum over terms t of (1 + ln tf_t) * g_t * e_t )

with e_t a learned d-vector and g_t = softplus(a_t) a learned term weight, initialised to the
term's inverse document frequency. The e_t start from a truncated SVD of the term-by-text matrix
(latent semantic analysis, --init lsa) and are tuned for one epoch: on the retrieval benchmark
more contrastive epochs lowered the ranking of real questions while raising the held-out pairs'
recall. A term outside the vocabulary is embedded as a pseudo-random row of length oov_norm
(termvec_embedder.cpp). Trained with in-batch negatives (InfoNCE, both directions,
temperature 0.05), SparseAdam. Exported as g_t * e_t, one row per term:

  DIR/config.json        {"model_type": "ragd-termvec", "dim", "vocab_size", "terms", "oov_norm", ...}
  DIR/vocab.txt          one term a line, row i of the matrix
  DIR/model.safetensors  "term_vectors" [vocab_size, dim], F16
  DIR/training_log.jsonl one line per epoch (loss, held-out recall@1 of 2,000 pairs)

retrieval/src/termvec_embedder.cpp reads it.
"""
import argparse
import json
import math
import os
import random
import sys
import time

import torch
import xapian

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama import save_safetensors  # noqa: E402


def term_generator():
    tg = xapian.TermGenerator()
    tg.set_stemmer(xapian.Stem("english"))
    tg.set_stemming_strategy(xapian.TermGenerator.STEM_ALL)
    return tg


def terms_of(tg, text):
    doc = xapian.Document()
    tg.set_document(doc)
    tg.index_text_without_positions(text)
    return [(t.term.decode("utf-8", "replace"), t.wdf) for t in doc.termlist()]


class Bags:
    """Texts as (ids, weights, offsets) for EmbeddingBag."""

    def __init__(self, texts, vocab):
        self.ids, self.tfw, self.start = [], [], [0]
        for terms in texts:
            for t, tf in terms:
                i = vocab.get(t)
                if i is not None:
                    self.ids.append(i)
                    self.tfw.append(1.0 + math.log(tf))
            self.start.append(len(self.ids))
        self.ids = torch.tensor(self.ids, dtype=torch.long)
        self.tfw = torch.tensor(self.tfw, dtype=torch.float32)
        self.start = torch.tensor(self.start, dtype=torch.long)

    def batch(self, rows, dropout=0.0):
        parts_i, parts_w, offs, n = [], [], [], 0
        for r in rows:
            a, b = int(self.start[r]), int(self.start[r + 1])
            ids, w = self.ids[a:b], self.tfw[a:b]
            if dropout > 0 and b - a > 1:
                keep = torch.rand(b - a) >= dropout
                if keep.any():
                    ids, w = ids[keep], w[keep]
            parts_i.append(ids)
            parts_w.append(w)
            offs.append(n)
            n += len(ids)
        return torch.cat(parts_i), torch.cat(parts_w), torch.tensor(offs, dtype=torch.long)


class TermVec(torch.nn.Module):
    def __init__(self, vocab_size, dim, idf):
        super().__init__()
        self.e = torch.nn.EmbeddingBag(vocab_size, dim, mode="sum", sparse=True)
        torch.nn.init.normal_(self.e.weight, std=1.0 / math.sqrt(dim))
        self.a = torch.nn.Embedding(vocab_size, 1, sparse=True)
        g = idf / idf.mean()
        with torch.no_grad():
            self.a.weight[:, 0] = torch.log(torch.expm1(g.clamp(min=1e-3)))

    def forward(self, ids, tfw, offs):
        g = torch.nn.functional.softplus(self.a(ids)[:, 0])
        v = self.e(ids, offs, per_sample_weights=tfw * g)
        return torch.nn.functional.normalize(v, dim=1, eps=1e-8)

    def export(self):
        with torch.no_grad():
            return self.e.weight * torch.nn.functional.softplus(self.a.weight)


def lsa_vectors(qb, pb, idf, dim):
    """Term rows of a rank-`dim` truncated SVD of the term-by-text matrix ((1 + ln tf) x idf,
    every query and passage a column): terms used in the same texts get nearby rows (latent
    semantic analysis). Rows scaled by the singular values' square roots, then to unit length."""
    rows, cols, vals, col = [], [], [], 0
    for b in (qb, pb):
        n = len(b.start) - 1
        lens = b.start[1:] - b.start[:-1]
        rows.append(b.ids)
        cols.append(torch.repeat_interleave(torch.arange(col, col + n), lens))
        vals.append(b.tfw * idf[b.ids])
        col += n
    x = torch.sparse_coo_tensor(torch.stack([torch.cat(rows), torch.cat(cols)]), torch.cat(vals),
                                (len(idf), col)).coalesce()
    u, s, _ = torch.svd_lowrank(x, q=dim, niter=3)
    return torch.nn.functional.normalize(u * s.sqrt(), dim=1, eps=1e-8)


def grouped_order(rows, docs, group, rng):
    """rows reordered so that consecutive runs of `group` rows come from one document (a
    document's rows shuffled and cut into groups, the groups shuffled); a document's last group
    may be shorter."""
    by = {}
    for r in rows:
        by.setdefault(docs[r], []).append(r)
    groups = []
    for d in sorted(by):
        rs = by[d]
        rng.shuffle(rs)
        groups += [rs[i: i + group] for i in range(0, len(rs), group)]
    rng.shuffle(groups)
    return [r for g in groups for r in g]


def recall_at_1(model, qb, pb, rows):
    with torch.no_grad():
        q = model(*qb.batch(rows))
        p = model(*pb.batch(rows))
        return (q @ p.T).argmax(1).eq(torch.arange(len(rows))).float().mean().item()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pairs")
    ap.add_argument("--out", required=True)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-df", type=int, default=3)
    ap.add_argument("--max-vocab", type=int, default=60000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--init", choices=["lsa", "random"], default="lsa",
                    help="term rows start from a truncated SVD of the term-by-text matrix, or at random")
    ap.add_argument("--term-dropout", type=float, default=0.0,
                    help="share of a text's terms left out at random in each training step")
    ap.add_argument("--doc-group", type=int, default=0,
                    help="batches made of groups of this many pairs of one document, so that a query's "
                         "in-batch negatives include other passages of its own document (0: pairs at random)")
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    t0 = time.monotonic()
    pairs, docs = [], []
    with open(a.pairs, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                pairs.append((r["q"], r["p"]))
                docs.append(r.get("doc", ""))
            except (json.JSONDecodeError, KeyError) as e:
                sys.exit(f"{a.pairs}:{n}: not a pair ({e})")
    tg = term_generator()
    qs = [terms_of(tg, q) for q, _ in pairs]
    ps = [terms_of(tg, p) for _, p in pairs]
    df = {}
    for terms in qs + ps:
        for t, _ in terms:
            df[t] = df.get(t, 0) + 1
    ntexts = len(qs) + len(ps)
    kept = sorted((t for t, c in df.items() if c >= a.min_df and len(t) <= 64), key=lambda t: (-df[t], t))
    kept = kept[: a.max_vocab]
    vocab = {t: i for i, t in enumerate(kept)}
    idf = torch.tensor([math.log(ntexts / df[t]) for t in kept], dtype=torch.float32)
    qb, pb = Bags(qs, vocab), Bags(ps, vocab)
    rows = [i for i in range(len(pairs)) if qb.start[i + 1] > qb.start[i] and pb.start[i + 1] > pb.start[i]]
    rng.shuffle(rows)
    held, train = rows[:2000], rows[2000:]
    print(f"termvec_train.py: {len(pairs)} pairs, vocabulary {len(kept)} terms (df >= {a.min_df}), "
          f"{len(train)} train / {len(held)} held out; prepared in {time.monotonic() - t0:.0f} s", flush=True)

    model = TermVec(len(kept), a.dim, idf)
    if a.init == "lsa":
        t1 = time.monotonic()
        with torch.no_grad():
            model.e.weight.copy_(lsa_vectors(qb, pb, idf, a.dim))
        print(f"termvec_train.py: LSA initialisation in {time.monotonic() - t1:.0f} s", flush=True)
    opt = torch.optim.SparseAdam(list(model.parameters()), lr=a.lr)
    os.makedirs(a.out, exist_ok=True)
    log = open(os.path.join(a.out, "training_log.jsonl"), "w")
    labels = None
    for epoch in range(1, a.epochs + 1):
        if a.doc_group > 0:
            train = grouped_order(train, docs, a.doc_group, rng)
        else:
            rng.shuffle(train)
        total, steps = 0.0, 0
        for s in range(0, len(train) - a.batch + 1, a.batch):
            rows_b = train[s: s + a.batch]
            q = model(*qb.batch(rows_b, a.term_dropout))
            p = model(*pb.batch(rows_b, a.term_dropout))
            logits = q @ p.T / a.temperature
            if labels is None or len(labels) != len(rows_b):
                labels = torch.arange(len(rows_b))
            loss = (torch.nn.functional.cross_entropy(logits, labels) +
                    torch.nn.functional.cross_entropy(logits.T, labels)) / 2
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item()
            steps += 1
        r1 = recall_at_1(model, qb, pb, held)
        rec = {"epoch": epoch, "loss": round(total / max(1, steps), 4), "heldout_recall_at_1": round(r1, 4),
               "seconds": round(time.monotonic() - t0, 1)}
        print(json.dumps(rec), flush=True)
        log.write(json.dumps(rec) + "\n")
        log.flush()

    w = model.export()
    # Terms outside the vocabulary get a pseudo-random row of this length at embedding time (the
    # rarest known terms' typical length: an unseen term is rarer still).
    norms = w.norm(dim=1)
    oov_norm = float(norms[int(len(norms) * 0.9):].median()) if len(norms) >= 10 else 1.0
    save_safetensors(os.path.join(a.out, "model.safetensors"), {"term_vectors": w}, dtype=torch.float16)
    with open(os.path.join(a.out, "vocab.txt"), "w", encoding="utf-8") as f:
        for t in kept:
            f.write(t + "\n")
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump({"model_type": "ragd-termvec", "dim": a.dim, "vocab_size": len(kept),
                   "terms": "xapian-english-stem-all", "tf": "1+ln", "pairs": len(pairs),
                   "epochs": a.epochs, "batch": a.batch, "lr": a.lr, "min_df": a.min_df,
                   "temperature": a.temperature, "init": a.init, "oov_norm": round(oov_norm, 4), "term_dropout": a.term_dropout, "doc_group": a.doc_group, "seed": a.seed}, f, indent=1)
        f.write("\n")
    print(f"termvec_train.py: wrote {a.out} in {time.monotonic() - t0:.0f} s")


if __name__ == "__main__":
    main()
