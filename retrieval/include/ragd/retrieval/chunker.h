// Token-aware chunker: cuts a document into chunks of at most `chunk_tokens` tokens, breaking at
// paragraph boundaries where it can, else at sentence boundaries, else between words, and only
// inside a word when one word alone is longer than a chunk.
//
// Each sentence is encoded on its own (with its trailing whitespace) so that every chunk's byte
// range is exact and its token ids are the encoding of its text pieces. Overlap is made of whole
// sentences from the end of the previous chunk, up to `overlap_tokens` tokens.
//
// Thread-safety: a Chunker is immutable after construction; chunk() is safe from any thread if the
// tokenizer's encode() is (engine::Tokenizer's is).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/document.h"

namespace ragd::retrieval {

struct ChunkerOptions {
  int chunk_tokens = 256;   // maximum tokens per chunk; default 256, must be >= 8
  int overlap_tokens = 0;   // tokens of trailing sentences repeated at the next chunk's start;
                            // default 0, must be < chunk_tokens / 2
  // A chunk may end at a paragraph break once it is at least this full (fraction of chunk_tokens)
  // if the next paragraph would not fit; default 0.5.
  double paragraph_break_fill = 0.5;
};

class Chunker {
 public:
  // InvalidArgument naming the field when the options are out of range.
  static Result<Chunker> create(const engine::Tokenizer& tokenizer, const ChunkerOptions& opts = {});

  // Chunks `text` (valid UTF-8). Whitespace-only pieces produce no chunk; an empty or
  // whitespace-only text gives no chunks. Chunk ids are left 0.
  // `sections` (in order, not overlapping, within the text; see Section): each is chunked on its
  // own, so no chunk (and no overlap) crosses a heading, and each chunk carries its section's path.
  // Text outside them is chunked as sections with an empty path. Sections out of order or out of
  // range are ignored (the text is then chunked as one piece).
  std::vector<Chunk> chunk(std::string_view doc_id, std::string_view text,
                           std::span<const Section> sections = {}) const;

  const ChunkerOptions& options() const { return opts_; }

 private:
  Chunker(const engine::Tokenizer& tok, const ChunkerOptions& opts) : tok_(&tok), opts_(opts) {}
  // Chunks text[begin, end) into `out`, token offsets counted from `token_base`; returns the
  // tokens the range encoded to.
  size_t chunk_range(std::string_view doc_id, std::string_view text, size_t begin, size_t end,
                     size_t token_base, const std::vector<std::string>& path, std::vector<Chunk>* out) const;
  const engine::Tokenizer* tok_;
  ChunkerOptions opts_;
};

}  // namespace ragd::retrieval
