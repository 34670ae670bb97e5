#include "ragd/retrieval/chunker.h"

#include <algorithm>
#include <string>

#include "ragd/retrieval/text_util.h"

namespace ragd::retrieval {

namespace {

// A piece of text encoded on its own: [begin, end) bytes, leading whitespace included.
struct Unit {
  size_t begin = 0;
  size_t end = 0;
  bool para_start = false;  // first unit of a paragraph
  std::vector<int32_t> tokens;
};

bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}'; }

// Splits text into sentence-like spans. Each span starts where the previous one ended (so it
// carries the whitespace before its content); the first starts at the first non-space byte and
// the last runs to the end of the text. Paragraph starts follow a blank line.
void split_sentences(std::string_view text, std::vector<Unit>* out) {
  size_t n = text.size();
  size_t i = 0;
  while (i < n && is_space_byte(text[i])) ++i;
  if (i == n) return;
  size_t start = i;
  bool para = true;
  auto close_at = [&](size_t content_end) {
    // content_end: one past the last content byte. Count newlines in the following whitespace.
    size_t j = content_end;
    int newlines = 0;
    while (j < n && is_space_byte(text[j])) {
      if (text[j] == '\n') ++newlines;
      ++j;
    }
    out->push_back(Unit{start, content_end, para, {}});
    para = newlines >= 2;
    start = content_end;
    return j;
  };
  while (i < n) {
    char c = text[i];
    if (c == '.' || c == '!' || c == '?') {
      size_t j = i + 1;
      while (j < n && (text[j] == '.' || text[j] == '!' || text[j] == '?' || is_closer(text[j]))) ++j;
      if (j == n || is_space_byte(text[j])) {
        i = close_at(j);
        continue;
      }
      i = j;
      continue;
    }
    if (c == '\n') {
      // end of a line: trim the spaces before it into the next unit
      size_t e = i;
      while (e > start && is_space_byte(text[e - 1])) --e;
      if (e > start) {
        i = close_at(e);
        continue;
      }
    }
    ++i;
  }
  if (start < n) {
    size_t e = n;
    while (e > start && is_space_byte(text[e - 1])) --e;
    if (e > start) out->push_back(Unit{start, e, para, {}});
  }
  // Trailing whitespace belongs to the last unit so that the units tile the text to its end.
  if (!out->empty()) out->back().end = n;
}

}  // namespace

Result<Chunker> Chunker::create(const engine::Tokenizer& tokenizer, const ChunkerOptions& opts) {
  if (opts.chunk_tokens < 8)
    return Status::InvalidArgument("chunker: chunk_tokens must be >= 8, got " + std::to_string(opts.chunk_tokens));
  if (opts.overlap_tokens < 0 || opts.overlap_tokens >= opts.chunk_tokens / 2)
    return Status::InvalidArgument("chunker: overlap_tokens must be in [0, chunk_tokens/2), got " +
                                   std::to_string(opts.overlap_tokens));
  if (!(opts.paragraph_break_fill >= 0.0 && opts.paragraph_break_fill <= 1.0))
    return Status::InvalidArgument("chunker: paragraph_break_fill must be in [0, 1]");
  return Chunker(tokenizer, opts);
}

std::vector<Chunk> Chunker::chunk(std::string_view doc_id, std::string_view text,
                                  std::span<const Section> sections) const {
  std::vector<Chunk> chunks;
  if (sections.empty() || !sections_fit(sections, text.size())) {
    chunk_range(doc_id, text, 0, text.size(), 0, {}, &chunks);
    return chunks;
  }
  static const std::vector<std::string> kNoPath;
  size_t tokens = 0;
  uint64_t at = 0;
  for (const Section& s : sections) {
    if (s.byte_begin > at) tokens += chunk_range(doc_id, text, at, s.byte_begin, tokens, kNoPath, &chunks);
    tokens += chunk_range(doc_id, text, s.byte_begin, s.byte_end, tokens, s.path, &chunks);
    at = s.byte_end;
  }
  if (at < text.size()) chunk_range(doc_id, text, at, text.size(), tokens, kNoPath, &chunks);
  return chunks;
}

size_t Chunker::chunk_range(std::string_view doc_id, std::string_view full, size_t begin, size_t end,
                            size_t token_base, const std::vector<std::string>& path,
                            std::vector<Chunk>* out) const {
  const size_t max_tok = static_cast<size_t>(opts_.chunk_tokens);
  // Offsets below are into `text`, the range; `begin` shifts them back into the document.
  std::string_view text = full.substr(begin, end - begin);
  std::vector<Unit> sentences;
  split_sentences(text, &sentences);

  // Encode sentences; split any longer than a chunk into word pieces, and words longer than a
  // chunk into token slices.
  std::vector<Unit> units;
  units.reserve(sentences.size());
  for (auto& s : sentences) {
    std::string_view piece = text.substr(s.begin, s.end - s.begin);
    s.tokens = tok_->encode(piece, /*add_bos=*/false, /*parse_special=*/false);
    if (s.tokens.size() <= max_tok) {
      units.push_back(std::move(s));
      continue;
    }
    bool first = true;
    size_t p = s.begin;
    while (p < s.end) {
      size_t q = p;
      while (q < s.end && is_space_byte(text[q])) ++q;
      while (q < s.end && !is_space_byte(text[q])) ++q;
      // whitespace at the very end goes with the last word
      size_t r = q;
      while (r < s.end && is_space_byte(text[r])) ++r;
      if (r == s.end) q = r;
      std::string_view word = text.substr(p, q - p);
      std::vector<int32_t> wt = tok_->encode(word, false, false);
      if (wt.size() <= max_tok) {
        units.push_back(Unit{p, q, first && s.para_start, std::move(wt)});
        first = false;
      } else {
        // Byte length of each token, when the tokens spell the word exactly (byte-level BPE);
        // otherwise offsets are proportional, floored to a UTF-8 boundary.
        std::vector<size_t> lens(wt.size());
        size_t total = 0;
        for (size_t k = 0; k < wt.size(); ++k) total += (lens[k] = tok_->token_bytes(wt[k]).size());
        bool exact = total == word.size();
        size_t b = p;
        size_t consumed = 0;
        for (size_t k = 0; k < wt.size(); k += max_tok) {
          size_t ke = std::min(wt.size(), k + max_tok);
          size_t e;
          if (ke == wt.size()) {
            e = q;
          } else if (exact) {
            for (size_t m = k; m < ke; ++m) consumed += lens[m];
            e = p + consumed;
          } else {
            e = p + utf8_floor(word, word.size() * ke / wt.size());
          }
          e = std::max(e, b);
          units.push_back(Unit{b, e, first && s.para_start,
                               std::vector<int32_t>(wt.begin() + k, wt.begin() + ke)});
          first = false;
          b = e;
        }
      }
      p = q;
    }
  }

  // Token offsets of each unit in the document's token stream.
  std::vector<size_t> tok_prefix(units.size() + 1, 0);
  for (size_t i = 0; i < units.size(); ++i) tok_prefix[i + 1] = tok_prefix[i] + units[i].tokens.size();
  // Tokens from unit i to the end of its paragraph.
  std::vector<size_t> para_rest(units.size() + 1, 0);
  for (size_t i = units.size(); i-- > 0;) {
    para_rest[i] = units[i].tokens.size() + ((i + 1 < units.size() && !units[i + 1].para_start) ? para_rest[i + 1] : 0);
  }

  std::vector<Chunk>& chunks = *out;
  auto emit = [&](size_t s, size_t e) {
    Chunk c;
    c.doc_id = std::string(doc_id);
    c.index = static_cast<uint32_t>(chunks.size());
    c.byte_begin = begin + units[s].begin;
    c.byte_end = begin + units[e - 1].end;
    c.token_begin = token_base + tok_prefix[s];
    c.token_end = token_base + tok_prefix[e];
    c.section = path;
    c.text = std::string(full.substr(c.byte_begin, c.byte_end - c.byte_begin));
    c.token_ids.reserve(c.token_end - c.token_begin);
    for (size_t i = s; i < e; ++i) c.token_ids.insert(c.token_ids.end(), units[i].tokens.begin(), units[i].tokens.end());
    bool blank = std::all_of(c.text.begin(), c.text.end(), [](char ch) { return is_space_byte(ch); });
    if (!blank && !c.token_ids.empty()) chunks.push_back(std::move(c));
  };
  const size_t overlap = static_cast<size_t>(opts_.overlap_tokens);
  const size_t fill = static_cast<size_t>(opts_.paragraph_break_fill * static_cast<double>(max_tok));
  size_t s = 0;  // current chunk is units [s, i)
  for (size_t i = 0; i < units.size(); ++i) {
    if (i == s) continue;
    size_t cur = tok_prefix[i] - tok_prefix[s];
    size_t next = units[i].tokens.size();
    bool full = cur + next > max_tok;
    bool para_break = units[i].para_start && cur >= fill && cur + para_rest[i] > max_tok;
    if (!full && !para_break) continue;
    emit(s, i);
    // New chunk: trailing whole units of the previous one, up to `overlap` tokens, leaving room
    // for unit i; never the whole previous chunk, so every chunk makes progress.
    size_t ns = i;
    while (overlap > 0 && ns > s + 1 &&
           tok_prefix[i] - tok_prefix[ns - 1] <= overlap &&
           tok_prefix[i] - tok_prefix[ns - 1] + next <= max_tok)
      --ns;
    s = ns;
  }
  if (s < units.size()) emit(s, units.size());
  return tok_prefix[units.size()];
}

}  // namespace ragd::retrieval
