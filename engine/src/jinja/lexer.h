// Template source to tokens, with jinja2's lexing rules as transformers configures them:
// newlines normalised to \n and one trailing newline dropped (keep_trailing_newline=False),
// trim_blocks (the newline after a block or comment tag is removed), lstrip_blocks (spaces and
// tabs before a block or comment tag on its own line are removed), '-' / '+' whitespace control,
// raw blocks, bracket balancing inside tags.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::engine::jinja {

enum class Tok : uint8_t {
  kData,        // template text (text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier (text)
  kString,      // string literal, decoded (text)
  kInt,         // integer literal (i)
  kFloat,       // float literal (f)
  kOp,          // operator (text): + - * / // % ** ~ [ ] ( ) { } == != < > <= >= = . : | , ;
  kEof,
};

struct Token {
  Tok type = Tok::kEof;
  int line = 1;
  std::string text;
  int64_t i = 0;
  double f = 0;
};

// Errors: InvalidArgument "line N: ..." (unterminated comment / string / tag, bad character,
// unbalanced brackets, a bad escape in a string literal).
Result<std::vector<Token>> lex(std::string_view source);

}  // namespace ragd::engine::jinja
