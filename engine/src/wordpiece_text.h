// BERT text normalisation and pre-tokenization over Unicode code points (ICU properties), shared by
// the WordPiece tokenizer and its vocabulary builder. Private to the engine.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/utf8.h"  // utf8_decode, append_utf8: text in and out of code points

namespace ragd::engine::wordpiece {

struct NormalizerOptions {
  bool enabled = true;               // false: no normaliser (tokenizer.json "normalizer": null)
  bool clean_text = true;            // drop NUL, U+FFFD and other (C*) characters; white space -> ' '
  bool handle_chinese_chars = true;  // a space on each side of every CJK ideograph
  bool strip_accents = true;         // NFD, then combining marks (Mn) dropped
  bool lowercase = true;             // per-character lower case
};

bool is_whitespace(char32_t c);    // \t \n \r and the Unicode White_Space property
bool is_control(char32_t c);       // general category C* except \t \n \r
bool is_punctuation(char32_t c);   // ASCII punctuation and symbols, or general category P*
bool is_chinese_char(char32_t c);  // the CJK ideograph blocks BERT pads with spaces

void normalize(std::u32string* text, const NormalizerOptions& o);
// Splits on white space (dropped) and, when split_punctuation, isolates each punctuation character.
void pre_tokenize(const std::u32string& text, bool split_punctuation, std::vector<std::string>* words);

}  // namespace ragd::engine::wordpiece
