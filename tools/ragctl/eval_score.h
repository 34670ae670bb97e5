// Answer scoring for `ragctl eval`: SQuAD-style normalisation (lower case, punctuation and the
// articles a/an/the removed, whitespace collapsed), exact match and token F1.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ragd::tools {

std::string normalize_answer(std::string_view s);
std::vector<std::string> answer_tokens(std::string_view s);  // normalised, split on spaces
bool exact_match(std::string_view prediction, std::string_view gold);
double token_f1(std::string_view prediction, std::string_view gold);

}  // namespace ragd::tools
