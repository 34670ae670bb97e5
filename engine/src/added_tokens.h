// tokenizer.json's "added_tokens" entries: one parser for the BPE and the WordPiece tokenizers
// (each places the tokens in its own vocabulary).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include <simdjson.h>

#include "ragd/common/status.h"

namespace ragd::engine {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
};

// Entry i of "added_tokens". InvalidArgument ("added_tokens[i].id must be ...") for an id that is
// not an integer in [0, max_id] or an empty / missing content; the caller prefixes its file name.
Result<AddedToken> parse_added_token(simdjson::dom::element entry, size_t i, int64_t max_id);

}  // namespace ragd::engine
