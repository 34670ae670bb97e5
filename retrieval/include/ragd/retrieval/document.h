// Plain value types shared by the retrieval module: a source document and the chunks cut from it.
// Thread-safety: value types, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ragd::retrieval {

// One document handed to ingestion. `id` is the stable key (a file's absolute path, or the id a
// JSONL record or an API client gave); re-ingesting the same id replaces or keeps the document.
struct Document {
  std::string id;      // required, non-empty, at most 1024 bytes
  std::string title;   // optional
  std::string text;    // required, valid UTF-8, non-empty
  std::string source;  // where it came from (path, path:line, URL); defaults to id when empty
  std::string tenant;  // owner; "" = shared (offline ingestion, operators). Ids are per owner.
  // A JSONL record's "metadata": (key, the value as minified JSON text), in the record's order;
  // values are strings, numbers, bools or lists of those (the reader checks). Read, not yet
  // persisted by the corpus.
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
  std::string text;                // == document.text.substr(byte_begin, byte_end - byte_begin)
  std::vector<int32_t> token_ids;  // [token_end - token_begin]
};

}  // namespace ragd::retrieval
