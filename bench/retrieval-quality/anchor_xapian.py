#!/usr/bin/python3
"""The anchor of the retrieval-quality benchmark: Xapian's BM25 run stand-alone on a document set.

Usage: anchor_xapian.py SET --out RESULTS.jsonl [--variant defaults|probe] [--sets sets.json]
                        [--questions FILE] [--top 10]

Runs with Debian's /usr/bin/python3 and python3-xapian (fetch-docs.sh installs both). Indexes the
set named in sets.json, asks every question of its questions file and writes one line per
question, {"id": ..., "ranked": [{"doc": ..., "page": ...}, ...]}, best first (score.py reads it;
"page" only for PDF sets).

Variants:
  defaults  Xapian as its documentation shows it, nothing tuned: one Xapian document per HTML page
            or PDF page; HTML text from a generic tag stripper (Python's html.parser, dropping only
            script and style), the <title> indexed both as a field (prefix S) and as free text
            with TermGenerator's defaults and the English stemmer; QueryParser with the English
            stemmer, STEM_SOME, the default flags, BM25Weight's default parameters.
  probe     closer to a hand-made BM25 setup: English stopwords (a short list of function words
            in this file) at index and query time; navigation, header, footer and sidebar markup
            dropped by a structural rule (nav / header / footer / aside elements; ARIA roles
            navigation / banner / contentinfo / complementary / search; elements whose class or
            id names nav / navbar / navigation / footer / sidebar / breadcrumb / toc / menu or
            ends in sidebar / footer); for PDF pages, a running head (a first line that starts at
            least three pages of the file) and lines holding only a number dropped; text cut into
            passages of about 200 words, each indexed with the page title at weight 2; the best
            1000 passages aggregated to pages by their maximum score.
"""
import argparse
import glob
import html.parser
import json
import os
import re
import subprocess
import sys
import time

import xapian

HERE = os.path.dirname(os.path.abspath(__file__))

# Common English function words and question filler, for the probe variant only.
STOPWORDS = """
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has
have having he her here hers him his how i if in into is it its itself just me more most my
myself no nor not now of off on once only or other our ours out over own same she should so some
such than that the their theirs them then there these they this those through to too under until
up very was we were what when where which while who whom why will with would you your yours
want need get got use using way make let like also please there's what's i'm i've don't doesn't
""".split()

DROP_TAGS = {"script", "style"}
STRUCTURE_TAGS = {"nav", "header", "footer", "aside"}
STRUCTURE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search"}
STRUCTURE_NAMES = {"nav", "navbar", "navigation", "footer", "sidebar", "breadcrumb", "breadcrumbs",
                   "toc", "menu"}
VOID_TAGS = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param",
             "source", "track", "wbr"}
BLOCK_TAGS = {"p", "div", "li", "dt", "dd", "pre", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5",
              "h6", "br", "table", "ul", "ol", "dl", "section", "blockquote"}


class TextExtractor(html.parser.HTMLParser):
    """Page text and <title>. Drops script and style; with structural=True also drops the
    navigation / header / footer / sidebar subtrees named above."""

    def __init__(self, structural):
        super().__init__(convert_charrefs=True)
        self.structural = structural
        self.parts = []
        self.title = []
        self.in_title = False
        self.stack = []  # open elements: True where the element starts a dropped subtree
        self.dropped = 0

    def _drops(self, tag, attrs):
        if tag in DROP_TAGS:
            return True
        if not self.structural:
            return False
        if tag in STRUCTURE_TAGS:
            return True
        a = dict(attrs)
        if (a.get("role") or "").lower() in STRUCTURE_ROLES:
            return True
        names = re.split(r"[^a-z]+", ((a.get("class") or "") + " " + (a.get("id") or "")).lower())
        return any(n in STRUCTURE_NAMES or n.endswith(("sidebar", "footer")) for n in names if n)

    def handle_starttag(self, tag, attrs):
        if tag == "title":
            self.in_title = True
        if tag in BLOCK_TAGS:
            self.parts.append("\n")
        if tag in VOID_TAGS:
            return
        drop = self._drops(tag, attrs)
        self.stack.append((tag, drop))
        if drop:
            self.dropped += 1

    def handle_startendtag(self, tag, attrs):
        if tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag == "title":
            self.in_title = False
        if tag in VOID_TAGS:
            return
        # Close up to the matching open element (HTML in the wild leaves some unclosed).
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for _, drop in self.stack[i:]:
                    if drop:
                        self.dropped -= 1
                del self.stack[i:]
                break
        if tag in BLOCK_TAGS:
            self.parts.append("\n")

    def handle_data(self, data):
        if self.in_title:
            self.title.append(data)
            return
        if self.dropped == 0:
            self.parts.append(data)


def html_pages(root, pattern, structural):
    for path in sorted(glob.glob(os.path.join(root, pattern), recursive=True)):
        with open(path, encoding="utf-8", errors="replace") as f:
            p = TextExtractor(structural)
            p.feed(f.read())
            p.close()
        title = re.sub(r"\s+", " ", "".join(p.title)).strip()
        yield {"doc": os.path.relpath(path, root), "page": None, "title": title,
               "text": "".join(p.parts)}


NUMBER_LINE = re.compile(r"^\s*([0-9]+|[ivxlc]+)\s*$")


def first_line(text):
    return next((l.strip() for l in text.split("\n") if l.strip()), "")


def pdf_pages(root, pattern, structural):
    for path in sorted(glob.glob(os.path.join(root, pattern))):
        out = subprocess.run(["pdftotext", "-enc", "UTF-8", path, "-"], check=True,
                             capture_output=True).stdout.decode("utf-8", errors="replace")
        pages = out.split("\f")
        if pages and not pages[-1].strip():
            pages.pop()
        # A running head: a first line that starts at least three pages of the file.
        heads = {}
        for text in pages:
            heads[first_line(text)] = heads.get(first_line(text), 0) + 1
        for n, text in enumerate(pages, 1):
            if structural:
                lines = text.split("\n")
                if heads.get(first_line(text), 0) >= 3:
                    lines.remove(next(l for l in lines if l.strip()))
                text = "\n".join(l for l in lines if not NUMBER_LINE.match(l))
            yield {"doc": os.path.relpath(path, root), "page": n, "title": "", "text": text}


def passages(text, words=200):
    toks = text.split()
    for i in range(0, max(len(toks), 1), words):
        yield " ".join(toks[i:i + words])


def build(pages, variant):
    db = xapian.WritableDatabase("", xapian.DB_BACKEND_INMEMORY)
    tg = xapian.TermGenerator()
    tg.set_stemmer(xapian.Stem("english"))
    stopper = None
    if variant == "probe":
        stopper = xapian.SimpleStopper()
        for w in STOPWORDS:
            stopper.add(w)
        tg.set_stopper(stopper)
    units = 0
    for page in pages:
        key = json.dumps({"doc": page["doc"], "page": page["page"]})
        chunks = [page["text"]] if variant == "defaults" else list(passages(page["text"]))
        for chunk in chunks:
            doc = xapian.Document()
            tg.set_document(doc)
            if variant == "defaults":
                tg.index_text(page["title"], 1, "S")
                tg.index_text(page["title"])
                tg.increase_termpos()
                tg.index_text(chunk)
            else:
                tg.index_text(page["title"], 2)
                tg.increase_termpos()
                tg.index_text(chunk)
            doc.set_data(key)
            db.add_document(doc)
            units += 1
    db.commit()
    return db, stopper, units


def make_parser(db, stopper):
    qp = xapian.QueryParser()
    qp.set_stemmer(xapian.Stem("english"))
    qp.set_stemming_strategy(xapian.QueryParser.STEM_SOME)
    qp.set_database(db)
    qp.add_prefix("title", "S")
    if stopper is not None:
        qp.set_stopper(stopper)
    return qp


def parse(qp, text):
    try:
        return qp.parse_query(text)
    except xapian.QueryParserError:
        # The default flags treat some punctuation as syntax; fall back to plain terms.
        return qp.parse_query(text, 0)


def search(db, qp, text, top, variant):
    enquire = xapian.Enquire(db)  # BM25Weight with its default parameters
    enquire.set_query(parse(qp, text))
    ranked, seen = [], set()
    depth = top if variant == "defaults" else 1000
    for m in enquire.get_mset(0, depth):
        key = m.document.get_data().decode("utf-8")
        if key in seen:  # passages aggregated to their page by the maximum score
            continue
        seen.add(key)
        item = json.loads(key)
        if item["page"] is None:
            del item["page"]
        ranked.append(item)
        if len(ranked) == top:
            break
    return ranked


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("set", help="set name in sets.json")
    ap.add_argument("--out", required=True, help="results JSONL to write")
    ap.add_argument("--variant", choices=["defaults", "probe"], default="defaults")
    ap.add_argument("--sets", default=os.path.join(HERE, "sets.json"))
    ap.add_argument("--questions", help="questions JSONL (default: the set's file in sets.json)")
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)

    with open(args.sets, encoding="utf-8") as f:
        sets = json.load(f)
    if args.set not in sets:
        print(f"anchor_xapian.py: no set '{args.set}' in {args.sets}", file=sys.stderr)
        return 2
    s = sets[args.set]
    qpath = args.questions or os.path.join(os.path.dirname(os.path.abspath(args.sets)),
                                          s["questions"])
    structural = args.variant == "probe"
    reader = html_pages if s["kind"] == "html" else pdf_pages

    t0 = time.monotonic()
    pages = list(reader(s["root"], s["glob"], structural))
    if not pages:
        print(f"anchor_xapian.py: no documents under {s['root']}/{s['glob']} "
              f"(run fetch-docs.sh)", file=sys.stderr)
        return 1
    db, stopper, units = build(pages, args.variant)
    t1 = time.monotonic()
    qp = make_parser(db, stopper)
    n = 0
    with open(qpath, encoding="utf-8") as f, open(args.out, "w", encoding="utf-8") as out:
        for line in f:
            if not line.strip():
                continue
            q = json.loads(line)
            ranked = search(db, qp, q["question"], args.top, args.variant)
            out.write(json.dumps({"id": q["id"], "ranked": ranked}) + "\n")
            n += 1
    t2 = time.monotonic()
    print(f"anchor_xapian.py {args.set} [{args.variant}]: {len(pages)} pages, {units} indexed "
          f"units in {t1 - t0:.1f} s; {n} questions in {t2 - t1:.2f} s -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
