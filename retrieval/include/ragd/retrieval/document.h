// Plain value types shared by the retrieval module: a source document and the chunks cut from it.
// Thread-safety: value types, no shared state.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace ragd::retrieval {

// A stretch of a document's text under one heading: [byte_begin, byte_end) of Document::text, and
// the headings that enclose it, outermost first ({"json — JSON encoder and decoder", "Basic
// Usage"}); text before the first heading has an empty path. A document's sections are in text
// order and do not overlap; text outside every section is chunked as a section with an empty path.
struct Section {
  std::vector<std::string> path;
  uint64_t byte_begin = 0;
  uint64_t byte_end = 0;
};

// Whether `sections` are in order, do not overlap and lie within a text of `text_bytes` bytes.
inline bool sections_fit(std::span<const Section> sections, uint64_t text_bytes) {
  uint64_t at = 0;
  for (const Section& s : sections) {
    if (s.byte_begin < at || s.byte_end < s.byte_begin || s.byte_end > text_bytes) return false;
    at = s.byte_end;
  }
  return true;
}

// One document handed to ingestion. `id` is the stable key (a file's absolute path, or the id a
// JSONL record or an API client gave); re-ingesting the same id replaces or keeps the document.
struct Document {
  std::string id;      // required, non-empty, at most 1024 bytes
  std::string title;   // optional
  std::string text;    // required, valid UTF-8, non-empty
  std::string source;  // where it came from (path, path:line, URL); defaults to id when empty
  std::string tenant;  // owner; "" = shared (offline ingestion, operators). Ids are per owner.
  // Citation fields, stored with the document and returned with every passage cut from it.
  std::string url;     // a JSONL record's "url", an API client's; "" = none
  std::string format;  // "html", "pdf", "markdown", "text", "jsonl", or what the client said; "" = unknown
  uint32_t page = 0;   // 1-based physical page of a PDF page's document; 0 = not a page
  // Headings (HTML, Markdown): chunks never straddle a section, and each carries its path.
  std::vector<Section> sections;
  // "metadata": (key, the value as minified JSON text), in the record's order; values are strings,
  // numbers, bools or lists of those (the reader and the API check). Stored with the document.
  std::vector<std::pair<std::string, std::string>> metadata;
};

// A piece of a document's text of at most Chunker's chunk_tokens tokens.
// Offsets are into the document's `text`: bytes [byte_begin, byte_end), tokens
// [token_begin, token_end) of the document's token stream (the concatenation of the per-sentence
// encodings the chunker made). Overlapping chunks share a token range.
struct Chunk {
  uint64_t id = 0;         // stable 64-bit chunk id (assigned by the document store; 0 = unassigned)
  std::string doc_id;
  uint32_t index = 0;      // position of the chunk within its document
  uint64_t byte_begin = 0;
  uint64_t byte_end = 0;
  uint64_t token_begin = 0;
  uint64_t token_end = 0;
  std::vector<std::string> section;  // the section path of the chunk's text (see Section)
  std::string text;                // == document.text.substr(byte_begin, byte_end - byte_begin)
  std::vector<int32_t> token_ids;  // [token_end - token_begin]
};

}  // namespace ragd::retrieval
