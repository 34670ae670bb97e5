#!/usr/bin/env python3
"""Scores a retriever's rankings against a question set of the retrieval-quality benchmark.

Usage: score.py QUESTIONS.jsonl RESULTS.jsonl [--out SUMMARY.json] [--name NAME] [--misses]

QUESTIONS.jsonl: one question a line, {"id", "question", "doc", "page"?, "pages"?, "section"?}.
  HTML sets: "doc" is the page's path relative to the set's root ("library/json.html"); "docs" an
  optional list of every acceptable page (a task's how-to and the module page it configures; when
  present it is the list that counts, "doc" first in it).
  PDF sets: "doc" is the file name, "page" the 1-based physical page that answers it, "pages" an
  optional list of every acceptable page (when present it is the list that counts).
RESULTS.jsonl: one line per question, {"id": ..., "ranked": [{"doc": ..., "page": ...}, ...]},
  best first; "page" is required for PDF sets and ignored for HTML sets; other keys are ignored.
  A question with no line in the results counts as a miss (and is reported); an id that is not in
  the questions, a repeated id or a malformed line is an error that names the line.

A hit is the right doc (HTML) or the right doc and an acceptable page (PDF). A page that appears
more than once in a ranking counts once, at its first position, so passage-level rankings can be
scored as they are. For PDF sets a doc-level hit (any page of the right file) is reported too.
Metrics: hit@1, hit@5, hit@10, MRR@5, MRR@10 (reciprocal rank of the first hit, 0 beyond k).
Exit status: 0 on success, 2 on malformed input.
"""
import argparse
import json
import sys


class InputError(Exception):
    pass


def read_jsonl(path):
    """Yields (line number, object) for each non-blank line; a line that is not a JSON object is
    an InputError naming the file and line."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{n}: not JSON: {e}") from None
            if not isinstance(obj, dict):
                raise InputError(f"{path}:{n}: not a JSON object")
            yield n, obj


def load_questions(path):
    questions = {}
    for n, q in read_jsonl(path):
        for key in ("id", "question", "doc"):
            if not isinstance(q.get(key), str) or not q[key]:
                raise InputError(f"{path}:{n}: missing or empty string field '{key}'")
        if q["id"] in questions:
            raise InputError(f"{path}:{n}: id '{q['id']}' repeated")
        pages = q.get("pages")
        if pages is None and "page" in q:
            pages = [q["page"]]
        if pages is not None:
            if not isinstance(pages, list) or not pages or not all(
                    isinstance(p, int) and not isinstance(p, bool) and p >= 1 for p in pages):
                raise InputError(f"{path}:{n}: 'page' / 'pages' must be positive integers")
            if "page" in q and q["page"] not in pages:
                raise InputError(f"{path}:{n}: 'page' {q['page']} is not in 'pages'")
        q["_pages"] = set(pages) if pages is not None else None
        docs = q.get("docs")
        if docs is not None:
            if pages is not None:
                raise InputError(f"{path}:{n}: 'docs' is for HTML sets (a PDF set lists 'pages')")
            if not isinstance(docs, list) or not docs or not all(isinstance(d, str) and d for d in docs):
                raise InputError(f"{path}:{n}: 'docs' must be a list of page paths")
            if docs[0] != q["doc"]:
                raise InputError(f"{path}:{n}: 'docs' must start with 'doc' ({q['doc']})")
        q["_docs"] = set(docs) if docs is not None else {q["doc"]}
        questions[q["id"]] = q
    if not questions:
        raise InputError(f"{path}: no questions")
    paged = {q["_pages"] is not None for q in questions.values()}
    if len(paged) != 1:
        raise InputError(f"{path}: some questions have pages and some do not; one kind per set")
    return questions


def load_results(path, questions, paged):
    rankings = {}
    for n, r in read_jsonl(path):
        qid = r.get("id")
        if not isinstance(qid, str):
            raise InputError(f"{path}:{n}: missing string field 'id'")
        if qid not in questions:
            raise InputError(f"{path}:{n}: id '{qid}' is not a question of the set")
        if qid in rankings:
            raise InputError(f"{path}:{n}: id '{qid}' repeated")
        ranked = r.get("ranked")
        if not isinstance(ranked, list):
            raise InputError(f"{path}:{n}: 'ranked' must be a list")
        keys = []
        for i, item in enumerate(ranked):
            if not isinstance(item, dict) or not isinstance(item.get("doc"), str):
                raise InputError(f"{path}:{n}: ranked[{i}] must be an object with a string 'doc'")
            page = item.get("page")
            if paged:
                if not isinstance(page, int) or isinstance(page, bool):
                    raise InputError(f"{path}:{n}: ranked[{i}] needs an integer 'page' (PDF set)")
                keys.append((item["doc"], page))
            else:
                keys.append((item["doc"], None))
        rankings[qid] = dedupe(keys)
    return rankings


def dedupe(keys):
    seen = set()
    out = []
    for k in keys:
        if k not in seen:
            seen.add(k)
            out.append(k)
    return out


def first_hit(ranking, is_hit):
    """1-based rank of the first hit, or None."""
    for i, key in enumerate(ranking, 1):
        if is_hit(key):
            return i
    return None


def metrics(ranks, total):
    def hit(k):
        return sum(1 for r in ranks if r is not None and r <= k) / total

    def mrr(k):
        return sum(1.0 / r for r in ranks if r is not None and r <= k) / total

    return {"hit@1": hit(1), "hit@5": hit(5), "hit@10": hit(10), "mrr@5": mrr(5), "mrr@10": mrr(10)}


def score(questions, rankings):
    paged = next(iter(questions.values()))["_pages"] is not None
    ranks, doc_ranks, per_question = [], [], {}
    for qid, q in questions.items():
        ranking = rankings.get(qid, [])
        if paged:
            r = first_hit(ranking, lambda k: k[0] == q["doc"] and k[1] in q["_pages"])
            docs = dedupe([k[0] for k in ranking])
            doc_ranks.append(first_hit([(d, None) for d in docs], lambda k: k[0] == q["doc"]))
        else:
            r = first_hit(ranking, lambda k: k[0] in q["_docs"])
        ranks.append(r)
        per_question[qid] = r
    summary = {"questions": len(questions),
               "answered": sum(1 for qid in questions if qid in rankings)}
    summary.update({k: round(v, 4) for k, v in metrics(ranks, len(questions)).items()})
    if paged:
        summary["doc_level"] = {k: round(v, 4) for k, v in metrics(doc_ranks, len(questions)).items()}
    summary["rank"] = per_question
    return summary


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("questions")
    ap.add_argument("results")
    ap.add_argument("--out", help="write the summary (metrics and each question's rank) as JSON")
    ap.add_argument("--name", help="retriever name recorded in the summary")
    ap.add_argument("--misses", action="store_true", help="list the questions not hit in the top 5")
    args = ap.parse_args(argv)
    try:
        questions = load_questions(args.questions)
        paged = next(iter(questions.values()))["_pages"] is not None
        rankings = load_results(args.results, questions, paged)
    except (InputError, OSError) as e:
        print(f"score.py: {e}", file=sys.stderr)
        return 2
    s = score(questions, rankings)
    if args.name:
        s = {"retriever": args.name, **s}
    s = {"questions_file": args.questions, "results_file": args.results, **s}
    label = args.name or args.results
    print(f"{label}: {s['questions']} questions ({s['answered']} answered)  hit@1 {s['hit@1']:.3f}  "
          f"hit@5 {s['hit@5']:.3f}  hit@10 {s['hit@10']:.3f}  MRR@5 {s['mrr@5']:.3f}  "
          f"MRR@10 {s['mrr@10']:.3f}")
    if paged:
        d = s["doc_level"]
        print(f"  doc-level (any page of the file): hit@1 {d['hit@1']:.3f}  hit@5 {d['hit@5']:.3f}")
    if args.misses:
        for qid, r in s["rank"].items():
            if r is None or r > 5:
                q = questions[qid]
                where = q["doc"] + (f" p{sorted(q['_pages'])}" if paged else "")
                print(f"  miss {qid} (rank {r}) {where}: {q['question']}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(s, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
