// The lexical index's terms of a piece of text, for callers outside the index that need to compare
// texts the way lexical search does (the semantic cache's grounding check, pipelines/src/
// semantic_cache.h). Thread-safety: safe from any thread (each thread counts with its own
// TermCounter, lexical_index.cpp).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ragd::retrieval {

// The terms the lexical index writes for `text` as chunk text and looks a query's words up by:
// words stemmed with the English stemmer, stopwords (lexical_index.cpp's list) left out. Sorted,
// each once.
std::vector<std::string> lexical_terms(std::string_view text);

}  // namespace ragd::retrieval
