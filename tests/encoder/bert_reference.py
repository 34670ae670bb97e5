#!/usr/bin/python3
"""Independent reference for the BERT-family encoder tests: WordPiece tokenization written from the
tokenizer.json description with Python's unicodedata, and (with torch) a BERT forward pass built by
hand from the safetensors weights plus the sentence-transformers pooling.

  bert_reference.py tokenize TOKENIZER_JSON TEXTS_JSON MAX_LEN OUT_JSON
      TEXTS_JSON: a list of strings or of [a, b] pairs; OUT_JSON: [{"ids": [...], "type_ids": [...]}]
  bert_reference.py embed MODEL_DIR TEXTS_JSON OUT_BIN [PREFIX]
      OUT_BIN: float32 [len(texts), dim] (pooling, normalisation and max_seq_length as the
      directory's sentence-transformers files say)
  bert_reference.py score MODEL_DIR PAIRS_JSON OUT_BIN
      BertForSequenceClassification logits, float32 [len(pairs), num_labels]
"""
import json
import os
import struct
import sys
import unicodedata


# ---- WordPiece ----------------------------------------------------------------------------------

# The Unicode White_Space property (PropList.txt).
WHITE_SPACE = set(range(0x09, 0x0E)) | {0x20, 0x85, 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000} | \
    set(range(0x2000, 0x200B))


def is_whitespace(ch):
    return ord(ch) in WHITE_SPACE


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punct(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or
            0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or
            0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class WordPiece:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            tj = json.load(f)
        m = tj["model"]
        assert m["type"] == "WordPiece"
        self.vocab = dict(m["vocab"])
        self.unk = self.vocab[m.get("unk_token", "[UNK]")]
        self.prefix = m.get("continuing_subword_prefix", "##")
        self.max_chars = m.get("max_input_chars_per_word", 100)
        self.added = sorted(tj.get("added_tokens") or [], key=lambda t: -len(t["content"]))
        for t in self.added:
            self.vocab[t["content"]] = t["id"]
        n = tj.get("normalizer")
        self.norm = n
        if n is not None:
            assert n["type"] == "BertNormalizer"
            self.clean = n.get("clean_text", True)
            self.chinese = n.get("handle_chinese_chars", True)
            self.lower = n.get("lowercase", True)
            sa = n.get("strip_accents")
            self.strip = self.lower if sa is None else sa
        pt = tj.get("pre_tokenizer")
        self.split_punct = pt is not None and pt["type"] == "BertPreTokenizer"
        pp = tj.get("post_processor")
        self.single, self.pair = self._templates(pp)

    def _templates(self, pp):
        if pp is None:
            return [("A", 0)], [("A", 0), ("B", 1)]
        if pp["type"] == "BertProcessing":
            c, s = pp["cls"][1], pp["sep"][1]
            return [([c], 0), ("A", 0), ([s], 0)], [([c], 0), ("A", 0), ([s], 0), ("B", 1), ([s], 1)]
        specials = pp["special_tokens"]

        def conv(items):
            out = []
            for it in items:
                if "SpecialToken" in it:
                    st = it["SpecialToken"]
                    out.append((list(specials[st["id"]]["ids"]), st.get("type_id", 0)))
                else:
                    out.append((it["Sequence"]["id"], it["Sequence"].get("type_id", 0)))
            return out
        return conv(pp["single"]), conv(pp["pair"])

    def normalize(self, text):
        if self.norm is None:
            return text
        out = []
        for ch in text:
            if self.clean:
                if ch == "\0" or ch == "\ufffd" or is_control(ch):
                    continue
                if is_whitespace(ch):
                    out.append(" ")
                    continue
            if self.chinese and is_cjk(ord(ch)):
                out.append(" " + ch + " ")
                continue
            out.append(ch)
        s = "".join(out)
        if self.strip:
            s = "".join(c for c in unicodedata.normalize("NFD", s) if unicodedata.category(c) != "Mn")
        if self.lower:
            s = "".join(c.lower() for c in s)  # per character: no final-sigma context
        return s

    def words(self, text):
        s = self.normalize(text)
        words, cur = [], []
        for ch in s:
            if is_whitespace(ch):
                if cur:
                    words.append("".join(cur))
                cur = []
            elif self.split_punct and is_punct(ch):
                if cur:
                    words.append("".join(cur))
                words.append(ch)
                cur = []
            else:
                cur.append(ch)
        if cur:
            words.append("".join(cur))
        return words

    def word_ids(self, w):
        if len(w) > self.max_chars:
            return [self.unk]
        ids, start = [], 0
        while start < len(w):
            end, cur = len(w), None
            while start < end:
                sub = w[start:end]
                if start > 0:
                    sub = self.prefix + sub
                if sub in self.vocab:
                    cur = self.vocab[sub]
                    break
                end -= 1
            if cur is None:
                return [self.unk]
            ids.append(cur)
            start = end
        return ids

    def content_ids(self, text):
        ids, seg, i = [], 0, 0
        while i < len(text):
            hit = next((t for t in self.added if text.startswith(t["content"], i)), None)
            if hit is None:
                i += 1
                continue
            for w in self.words(text[seg:i]):
                ids += self.word_ids(w)
            ids.append(hit["id"])
            i += len(hit["content"])
            seg = i
        for w in self.words(text[seg:]):
            ids += self.word_ids(w)
        return ids

    def _apply(self, tmpl, a, b):
        ids, types = [], []
        for what, t in tmpl:
            seq = a if what == "A" else b if what == "B" else what
            ids += seq
            types += [t] * len(seq)
        return {"ids": ids, "type_ids": types}

    def encode(self, text, max_len):
        a = self.content_ids(text)
        n_special = sum(len(w) for w, _ in self.single if not isinstance(w, str))
        if max_len > 0:
            a = a[:max(0, max_len - n_special)]
        return self._apply(self.single, a, [])

    def encode_pair(self, ta, tb, max_len):
        a, b = self.content_ids(ta), self.content_ids(tb)
        n_special = sum(len(w) for w, _ in self.pair if not isinstance(w, str))
        if max_len > 0:
            budget = max(0, max_len - n_special)
            if len(a) + len(b) > budget:
                if len(a) <= len(b):
                    a = a[:min(len(a), budget // 2)]
                    b = b[:budget - len(a)]
                else:
                    b = b[:min(len(b), budget // 2)]
                    a = a[:budget - len(b)]
        return self._apply(self.pair, a, b)


# ---- BERT forward (torch) -----------------------------------------------------------------------

def read_safetensors(path):
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = bytearray(data[b:e])
        dt = info["dtype"]
        if dt == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        elif dt == "F16":
            t = torch.frombuffer(raw, dtype=torch.float16).float()
        elif dt == "BF16":
            t = torch.frombuffer(raw, dtype=torch.bfloat16).float()
        else:
            raise ValueError(dt)
        out[name] = t.reshape(info["shape"]).double()
    return out


def bert_forward(w, cfg, ids, types, prefix):
    """Hidden states [T, H] of one sequence, in float64."""
    import torch
    import torch.nn.functional as F
    g = lambda n: w[prefix + n]
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = H // nh
    eps = cfg.get("layer_norm_eps", 1e-12)
    ids_t = torch.tensor(ids, dtype=torch.long)
    pos = torch.arange(len(ids))
    x = g("embeddings.word_embeddings.weight")[ids_t] + g("embeddings.position_embeddings.weight")[pos]
    x = x + g("embeddings.token_type_embeddings.weight")[torch.tensor(types, dtype=torch.long)]

    def ln(v, name):
        return F.layer_norm(v, (H,), g(name + ".weight"), g(name + ".bias"), eps)

    def lin(v, name):
        return v @ g(name + ".weight").T + g(name + ".bias")

    x = ln(x, "embeddings.LayerNorm")
    T = len(ids)
    for i in range(cfg["num_hidden_layers"]):
        p = "encoder.layer.%d." % i
        q = lin(x, p + "attention.self.query").view(T, nh, hd).transpose(0, 1)
        k = lin(x, p + "attention.self.key").view(T, nh, hd).transpose(0, 1)
        v = lin(x, p + "attention.self.value").view(T, nh, hd).transpose(0, 1)
        att = torch.softmax(q @ k.transpose(1, 2) / (hd ** 0.5), dim=-1)
        ctx = (att @ v).transpose(0, 1).reshape(T, H)
        x = ln(lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        inter = lin(x, p + "intermediate.dense")
        inter = 0.5 * inter * (1.0 + torch.erf(inter / 2 ** 0.5))  # exact GELU
        x = ln(lin(inter, p + "output.dense") + x, p + "output.LayerNorm")
    return x


def load_model(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    w = read_safetensors(os.path.join(d, "model.safetensors"))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    return cfg, w, prefix


def embed(d, texts, prefix_text):
    import torch
    cfg, w, prefix = load_model(d)
    tok = WordPiece(os.path.join(d, "tokenizer.json"))
    max_len = cfg["max_position_embeddings"]
    p = os.path.join(d, "sentence_bert_config.json")
    if os.path.exists(p):
        with open(p) as f:
            max_len = json.load(f).get("max_seq_length", max_len)
    with open(os.path.join(d, "modules.json")) as f:
        modules = json.load(f)
    pool_dir = next(m["path"] for m in modules if m["type"].endswith("Pooling"))
    normalize = any(m["type"].endswith("Normalize") for m in modules)
    with open(os.path.join(d, pool_dir, "config.json")) as f:
        pc = json.load(f)
    rows = []
    for t in texts:
        enc = tok.encode(prefix_text + t, max_len)
        h = bert_forward(w, cfg, enc["ids"], enc["type_ids"], prefix)
        if pc.get("pooling_mode_cls_token"):
            v = h[0]
        elif pc.get("pooling_mode_lasttoken"):
            v = h[-1]
        else:
            v = h.mean(dim=0)
        if normalize:
            v = v / torch.clamp(v.norm(), min=1e-12)
        rows.append(v)
    return torch.stack(rows)


def score(d, pairs):
    import torch
    cfg, w, prefix = load_model(d)
    tok = WordPiece(os.path.join(d, "tokenizer.json"))
    rows = []
    for a, b in pairs:
        enc = tok.encode_pair(a, b, cfg["max_position_embeddings"])
        h = bert_forward(w, cfg, enc["ids"], enc["type_ids"], prefix)
        pooled = torch.tanh(h[0] @ w[prefix + "pooler.dense.weight"].T + w[prefix + "pooler.dense.bias"])
        rows.append(pooled @ w["classifier.weight"].T + w["classifier.bias"])
    return torch.stack(rows)


def main():
    cmd = sys.argv[1]
    if cmd == "tokenize":
        tok = WordPiece(sys.argv[2])
        with open(sys.argv[3], encoding="utf-8") as f:
            texts = json.load(f)
        max_len = int(sys.argv[4])
        out = [tok.encode_pair(t[0], t[1], max_len) if isinstance(t, list) else tok.encode(t, max_len) for t in texts]
        with open(sys.argv[5], "w") as f:
            json.dump(out, f)
        return 0
    try:
        import torch
    except ImportError:
        print("SKIP: python3-torch not installed")
        return 77
    torch.set_num_threads(2)
    with open(sys.argv[3], encoding="utf-8") as f:
        items = json.load(f)
    if cmd == "embed":
        t = embed(sys.argv[2], items, sys.argv[5] if len(sys.argv) > 5 else "")
    elif cmd == "score":
        t = score(sys.argv[2], items)
    else:
        raise SystemExit("unknown command " + cmd)
    with open(sys.argv[4], "wb") as f:
        f.write(struct.pack("<%df" % t.numel(), *t.flatten().tolist()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
