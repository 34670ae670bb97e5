#!/usr/bin/python3
"""Training pairs for the term-vector embedder (termvec_train.py), from Debian's documentation.

Usage: termvec_data.py --out PAIRS.jsonl [--ict-per-doc 30] [--seed 1] [--exclude REGEX ...]

Reads what Debian's documentation packages installed on this machine hold — manual pages
(/usr/share/man/man{1,3,5,7,8}), GNU info manuals (/usr/share/info), POD (perl-doc) and HTML
manuals (postgresql-doc-15, git-doc, debian-reference-en, ...; scripts/train-termvec.sh installs them) — and
writes (query, passage) pairs of five kinds, one JSON object a line, each with the path of the
document it came from ("doc"):

  name     a manual page's one-line description ("print lines that match patterns") and the
           first words of its DESCRIPTION section;
  heading  a section's heading ("Removing duplicate lines", a POD FAQ's question) and the first
           words of its body; headings that name a generic part ("OPTIONS", "SEE ALSO") are left
           out;
  ict      a sentence of a paragraph and the rest of the paragraph (the inverse cloze task of Lee
           et al., 2019): with probability 0.9 the sentence is removed from its passage;
  next     a paragraph and the first words of the paragraph after it;
  package  a Debian package's one-line synopsis ("fast and reliable load balancing reverse
           proxy") and its name and long description (--package-descriptions: the archive's
           Translation-en index).

The retrieval benchmark's documents (the Python library reference, the Bash manual, bash(1), the
Apache manual and apache2's pages) are excluded by default, so the benchmark measures documents the
embedder has not read.
"""
import argparse
import glob
import gzip
import html.parser
import json
import os
import random
import re
import subprocess
import sys

DEFAULT_EXCLUDE = [r"/bash[^/]*$", r"/rbash", r"python3\.11", r"/bash\.info", r"/translations/", r"/apache2"]
PASSAGE_WORDS = 160
FAMILY_CAP = 300
# HTML manuals of the packages scripts/train-termvec.sh installs.
HTML_ROOTS = [
    "/usr/share/doc/postgresql-doc-15/html",    # postgresql-doc-15
    "/usr/share/doc/git",                       # git-doc
    "/usr/share/doc/debian-reference-en",       # debian-reference-en
    "/usr/share/doc/cmake-data/html",           # cmake-doc
    "/usr/share/doc/sqlite3",                   # sqlite3-doc
    "/usr/share/doc/nodejs/api",                # nodejs-doc
    "/usr/share/doc/linux-doc-6.1/html",        # linux-doc-6.1
]
GENERIC_HEADINGS = {
    "name", "synopsis", "description", "options", "see also", "bugs", "author", "authors",
    "examples", "example", "files", "environment", "notes", "copyright", "exit status",
    "return value", "errors", "reporting bugs", "history", "availability", "conforming to",
    "attributes", "versions", "standards", "license", "overview", "introduction", "caveats",
    "diagnostics", "colophon", "acknowledgements", "acknowledgments", "todo",
    "return values", "usage", "summary", "contents", "table of contents", "index", "footnotes",
}

# ---------------------------------------------------------------------------------------------
# Manual pages (man(7) and mdoc(7) source)

ROFF_ESCAPES = [
    (re.compile(r"\\f(\[[^\]]*\]|\(..|.)"), ""),      # font changes
    (re.compile(r"\\s[+-]?\d+"), ""),                   # size changes
    (re.compile(r"\\\*(\[[^\]]*\]|\(..|.)"), ""),       # strings
    (re.compile(r"\\\((em|en|hy)"), "-"),
    (re.compile(r"\\\((lq|rq|dq)"), '"'),
    (re.compile(r"\\\((aq|oq|cq)"), "'"),
    (re.compile(r"\\\(.."), ""),
    (re.compile(r"\\\[[^\]]*\]"), ""),
    (re.compile(r"\\[-]"), "-"),
    (re.compile(r"\\e"), "\\\\"),
    (re.compile(r"\\[&|^%c:/,)!]"), ""),
    (re.compile(r"\\\"[^\n]*"), ""),                    # comments
    (re.compile(r"\\[ 0~]"), " "),
    (re.compile(r"\\(.)"), r"\1"),
]
TEXT_MACROS = re.compile(r"^\.(B|I|BI|BR|IB|IR|RB|RI|SM|SB|Nm|Ar|Fl|Cm|Pa|Va|Fn|Fa|Ft|Xr|Em|Sy|Li|Dq|Ql|Sq|Pq|Op|Ev|Er|Ic|Dv|It|Tn|Ux)\s+(.*)$")
BREAK_MACROS = re.compile(r"^\.(PP|P|LP|TP|IP|HP|sp|br|Pp|Bl|El|Bd|Ed|RS|RE|nf|fi|EX|EE|TQ|in)\b")


def roff_text(s):
    for pat, rep in ROFF_ESCAPES:
        s = pat.sub(rep, s)
    return s


def man_sections(src):
    """[(heading, [paragraph, ...]), ...] of one manual page's source."""
    sections = []
    heading = None
    paras, cur = [], []

    def flush_para():
        if cur:
            paras.append(" ".join(cur))
            cur.clear()

    def flush_section():
        flush_para()
        if heading is not None:
            sections.append((heading, list(paras)))
        paras.clear()

    for raw in src.splitlines():
        line = raw.rstrip()
        m = re.match(r'^\.(SH|SS|Sh|Ss)\s*(.*)$', line)
        if m:
            flush_section()
            heading = roff_text(m.group(2).strip().strip('"'))
            continue
        if line.startswith(".Nd "):
            flush_para()
            paras.append("\x00ND " + roff_text(line[4:]))
            continue
        m = TEXT_MACROS.match(line)
        if m:
            text = roff_text(m.group(2).replace('"', ""))
            if text.strip():
                cur.append(text)
            continue
        if BREAK_MACROS.match(line) or line == "":
            flush_para()
            continue
        if line.startswith(".") or line.startswith("'"):
            continue
        text = roff_text(line)
        if text.strip():
            cur.append(text)
    flush_section()
    return sections


def read_man(path):
    """A manual page as (name description or None, [(heading, [paragraph])])."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            src = f.read()
    except (OSError, EOFError):
        return None
    if src.lstrip().startswith(".so "):
        return None
    sections = man_sections(src)
    desc = None
    for h, paras in sections:
        if h.upper() == "NAME" and paras:
            for p in paras:
                if p.startswith("\x00ND "):
                    desc = p[4:].strip()
                    break
            if desc is None:
                m = re.match(r"^.*?\s+-+\s+(.*)$", paras[0])
                if m:
                    desc = m.group(1).strip()
    clean = [(h, [p for p in ps if not p.startswith("\x00ND ")]) for h, ps in sections if h.upper() != "NAME"]
    return desc, clean


# ---------------------------------------------------------------------------------------------
# GNU info manuals

def read_info(path):
    """[(node title, [paragraph])] of one info file."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
            src = f.read()
    except (OSError, EOFError):
        return []
    out = []
    for node in src.split("\x1f"):
        lines = node.strip("\n").splitlines()
        if not lines or not lines[0].startswith("File:"):
            continue
        m = re.search(r"Node:\s*([^,]+)", lines[0])
        if not m:
            continue
        title = m.group(1).strip()
        body = lines[1:]
        section_title = title
        paras, cur = [], []
        sections = []
        for i, line in enumerate(body):
            if re.match(r"^[=\-*.]{3,}\s*$", line) and i > 0:
                # the line above was a heading: take it back out of the paragraph
                if cur:
                    head = cur.pop()
                    if cur:
                        paras.append(" ".join(cur))
                    cur = []
                    if paras:
                        sections.append((section_title, paras))
                    paras = []
                    section_title = re.sub(r"^[\d.]+\s+", "", head.strip())
                continue
            if line.startswith("* Menu:") or line.startswith("* ") and "::" in line:
                continue
            if not line.strip():
                if cur:
                    paras.append(" ".join(cur))
                    cur = []
                continue
            cur.append(line.strip())
        if cur:
            paras.append(" ".join(cur))
        if paras:
            sections.append((section_title, paras))
        out.extend(sections)
    return out


# ---------------------------------------------------------------------------------------------
# POD

POD_CODES = re.compile(r"[A-Z]<<+\s(.*?)\s>>+|[A-Z]<([^<>]*)>")


def pod_text(s):
    prev = None
    while prev != s:
        prev = s
        s = POD_CODES.sub(lambda m: (m.group(1) or m.group(2) or "").split("|")[0], s)
    return s


def read_pod(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            src = f.read()
    except OSError:
        return []
    sections, heading, paras = [], None, []
    for block in re.split(r"\n\s*\n", src):
        b = block.strip()
        if not b:
            continue
        m = re.match(r"^=(head\d|item)\s+(.*)$", b, re.S)
        if m:
            if heading is not None and paras:
                sections.append((heading, paras))
            heading, paras = pod_text(m.group(2).strip()).replace("\n", " "), []
            continue
        if b.startswith("="):
            continue
        if block.startswith((" ", "\t")):
            continue  # verbatim code
        paras.append(pod_text(b).replace("\n", " "))
    if heading is not None and paras:
        sections.append((heading, paras))
    return sections


# ---------------------------------------------------------------------------------------------
# HTML manuals

class Sections(html.parser.HTMLParser):
    """Sections of an HTML page by its h1-h4 headings; navigation and scripts dropped."""
    SKIP = {"script", "style", "nav", "header", "footer", "aside"}
    BLOCK = {"p", "div", "li", "dt", "dd", "pre", "tr", "table", "ul", "ol", "dl", "section",
             "blockquote", "br"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.skip = 0
        self.stack = []
        self.in_heading = False
        self.heading = None
        self.head_parts = []
        self.cur = []
        self.paras = []
        self.sections = []

    def _flush_para(self):
        t = " ".join("".join(self.cur).split())
        if t:
            self.paras.append(t)
        self.cur = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "") + " " + (a.get("id") or "")
        skip = tag in self.SKIP or re.search(r"\b(nav|navbar|navheader|navfooter|sidebar|footer|toc|breadcrumb)\b", cls)
        if tag in ("br", "img", "hr", "meta", "link", "input"):
            return
        self.stack.append(tag if not skip else "#" + tag)
        if skip:
            self.skip += 1
        if self.skip:
            return
        if tag in ("h1", "h2", "h3", "h4"):
            self._flush_para()
            if self.heading is not None and self.paras:
                self.sections.append((self.heading, self.paras))
            self.paras = []
            self.in_heading = True
            self.head_parts = []
        elif tag in self.BLOCK:
            self._flush_para()

    def handle_endtag(self, tag):
        while self.stack:
            t = self.stack.pop()
            if t.startswith("#"):
                self.skip -= 1
            if t.lstrip("#") == tag:
                break
        if self.skip:
            return
        if tag in ("h1", "h2", "h3", "h4") and self.in_heading:
            self.in_heading = False
            self.heading = " ".join("".join(self.head_parts).split())
            self.heading = re.sub(r"^[\d.]+\s+", "", self.heading)
        elif tag in self.BLOCK:
            self._flush_para()

    def handle_data(self, data):
        if self.skip:
            return
        if self.in_heading:
            self.head_parts.append(data)
        else:
            self.cur.append(data)

    def close(self):
        super().close()
        self._flush_para()
        if self.heading is not None and self.paras:
            self.sections.append((self.heading, self.paras))


def read_html(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            src = f.read()
    except OSError:
        return []
    p = Sections()
    try:
        p.feed(src)
        p.close()
    except Exception:  # a malformed page contributes nothing
        return []
    return p.sections


# ---------------------------------------------------------------------------------------------
# Debian's package descriptions (the archive's Translation-en index: a one-line synopsis and a
# paragraph or more on what the package does, written by its maintainers)

# Packages whose descriptions are about the benchmark's documents themselves.
PACKAGE_EXCLUDE = re.compile(r"^(apache2|bash|python3\.11)")


def package_pairs(path):
    """(synopsis, "name long description") pairs of a Translation-en file (plain text, or any
    compression apt-helper reads), a description repeated by several packages kept once and a
    synopsis at most twice."""
    if path.endswith((".lz4", ".gz", ".xz", ".zst")):
        text = subprocess.run(["/usr/lib/apt/apt-helper", "cat-file", path], check=True,
                              capture_output=True).stdout.decode("utf-8", "replace")
    else:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    out, seen_body, seen_q = [], set(), {}
    for stanza in text.split("\n\n"):
        name, synopsis, body, in_desc = None, None, [], False
        for line in stanza.split("\n"):
            if line.startswith("Package: "):
                name = line[9:].strip()
            elif line.startswith("Description-en: "):
                synopsis, in_desc = line[16:].strip(), True
            elif line.startswith(" ") and in_desc:
                t = line.strip()
                if t != ".":
                    body.append(t)
            else:
                in_desc = False
        if not name or not synopsis or PACKAGE_EXCLUDE.match(name):
            continue
        words = " ".join(body).split()[:PASSAGE_WORDS]
        if len(words) < 15 or len(synopsis.split()) < 3:
            continue
        key = " ".join(words).lower()[:200]
        if key in seen_body:
            continue
        seen_body.add(key)
        q = synopsis.lower()
        seen_q[q] = seen_q.get(q, 0) + 1
        if seen_q[q] > 2:
            continue
        out.append({"kind": "package", "q": synopsis, "p": f"{name} {' '.join(words)}", "doc": "package:" + name})
    return out


# ---------------------------------------------------------------------------------------------

SENT = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")


def first_words(paras, n=PASSAGE_WORDS):
    out = []
    for p in paras:
        out.extend(p.split())
        if len(out) >= n:
            break
    return " ".join(out[:n])


def useful_heading(h):
    h = h.strip().strip(":")
    if h.lower() in GENERIC_HEADINGS:
        return False
    w = re.findall(r"[A-Za-z]{2,}", h)
    return len(w) >= 2 and len(h) <= 160


def pairs_of(doc_title, sections, desc, rng, ict_per_doc, next_per_doc, out):
    n = 0
    if desc and sections:
        body = first_words(sections[0][1] if sections[0][1] else [])
        for h, ps in sections:
            if h.upper() == "DESCRIPTION":
                body = first_words(ps)
                break
        if len(body.split()) >= 15 and len(desc.split()) >= 2:
            out.append({"kind": "name", "q": desc, "p": f"{doc_title} {body}"})
            n += 1
    paras_all = []
    for h, ps in sections:
        body = first_words(ps)
        if useful_heading(h) and len(body.split()) >= 20:
            out.append({"kind": "heading", "q": h, "p": f"{doc_title} {body}"})
            n += 1
        for p in ps:
            if len(p.split()) >= 40:
                paras_all.append((h, p))
    adjacent = [(h, ps[i], ps[i + 1]) for h, ps in sections for i in range(len(ps) - 1)
                if len(ps[i].split()) >= 12 and len(ps[i + 1].split()) >= 20]
    rng.shuffle(adjacent)
    for h, p1, p2 in adjacent[:next_per_doc]:
        out.append({"kind": "next", "q": " ".join(p1.split()[:60]), "p": f"{doc_title} {h} {first_words([p2])}"})
        n += 1
    rng.shuffle(paras_all)
    for h, p in paras_all[:ict_per_doc]:
        sents = [s for s in SENT.split(p) if s.strip()]
        if len(sents) < 3:
            continue
        i = rng.randrange(len(sents))
        q = sents[i]
        if not (6 <= len(q.split()) <= 40):
            continue
        rest = sents[:i] + sents[i + 1:] if rng.random() < 0.9 else sents
        ctx = doc_title + " " + h + " " + " ".join(" ".join(rest).split()[:PASSAGE_WORDS])
        out.append({"kind": "ict", "q": q, "p": ctx})
        n += 1
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--ict-per-doc", type=int, default=30)
    ap.add_argument("--next-per-doc", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--package-descriptions", action="append", default=[],
                    help="a Debian Translation-en index (scripts/train-termvec.sh fetches it): package pairs")
    ap.add_argument("--exclude", action="append", default=None,
                    help="regex over paths to leave out (default: the benchmark's documents)")
    a = ap.parse_args()
    exclude = [re.compile(x) for x in (a.exclude if a.exclude is not None else DEFAULT_EXCLUDE)]
    rng = random.Random(a.seed)

    files = []
    for sec in ("1", "3", "5", "7", "8"):
        files += [("man", p) for p in sorted(glob.glob(f"/usr/share/man/man{sec}/*.gz"))]
    files += [("info", p) for p in sorted(glob.glob("/usr/share/info/*.info*.gz"))]
    files += [("pod", p) for p in sorted(glob.glob("/usr/share/perl/*/pod/*.pod"))]
    for root in HTML_ROOTS:
        files += [("html", p) for p in sorted(glob.glob(f"{root}/**/*.html", recursive=True))]
    files = [(k, p) for k, p in files if not any(x.search(p) for x in exclude)]
    # A family of generated pages (16,000 `gcloud ...` pages on one machine) would drown the rest:
    # at most FAMILY_CAP pages of a family (the name before the first '_', '-' or '.').
    family, kept = {}, []
    for k, p in files:
        fam = (k, re.split(r"[_.-]", os.path.basename(p))[0]) if k == "man" else (k, p)
        family.setdefault(fam, []).append((k, p))
    for fam in sorted(family):
        group = family[fam]
        if len(group) > FAMILY_CAP:
            group = sorted(rng.sample(group, FAMILY_CAP))
        kept.extend(group)
    files = kept
    if not files:
        sys.exit("termvec_data.py: no documentation found (run scripts/train-termvec.sh, which installs them)")

    out, counts = [], {}
    for kind, path in files:
        desc = None
        if kind == "man":
            r = read_man(path)
            if r is None:
                continue
            desc, sections = r
        elif kind == "info":
            sections = read_info(path)
        elif kind == "pod":
            sections = read_pod(path)
        else:
            sections = read_html(path)
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "man":
            title = re.sub(r"\.\w+\.gz$", "", os.path.basename(path))
        elif kind == "info":
            title = re.sub(r"(-\d+)?\.info.*$", "", os.path.basename(path))
        else:
            title = sections[0][0] if sections else ""
        first = len(out)
        pairs_of(title, sections, desc, rng, a.ict_per_doc, a.next_per_doc, out)
        for r in out[first:]:
            r["doc"] = path  # the trainer groups a document's pairs into one batch (--doc-group)
    for path in a.package_descriptions:
        pkgs = package_pairs(path)
        counts["package"] = counts.get("package", 0) + len(pkgs)
        out.extend(pkgs)
    # The same query text at most twice (boilerplate sentences and headings repeat across pages).
    seen, unique = {}, []
    for r in out:
        key = r["q"].lower()
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= 2:
            unique.append(r)
    out = unique
    rng.shuffle(out)
    with open(a.out, "w", encoding="utf-8") as f:
        for r in out:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    by = {}
    for r in out:
        by[r["kind"]] = by.get(r["kind"], 0) + 1
    print(f"termvec_data.py: {sum(counts.values())} documents {counts} -> {len(out)} pairs {by} -> {a.out}")


if __name__ == "__main__":
    main()
