// TermCounter: the terms of text exactly as Xapian's TermGenerator writes them under the lexical
// index's configuration (English stemmer, STEM_ALL, STOP_ALL with the index's stopwords, no
// positions, words of at most 64 bytes), at a fraction of its cost. Term generation was a third of
// a chunk's lexical indexing time, most of it per word: Unicode classification, a stopword set of
// strings, the Snowball stemmer, a map insert. Here ASCII text is split by TermGenerator's rules
// (word characters [A-Za-z0-9_]; ' and & joining words; , . ; joining digits; initials such as
// "U.S.A." as one word; up to three + or # ending a word, as in "C++"), each distinct word is
// stemmed once per counter (a cache), and words are counted in a hash map; a whitespace-separated
// field holding any non-ASCII byte goes to TermGenerator itself (ASCII whitespace is never part of
// a word, so fields tokenise independently). Tested equal to TermGenerator on random and real text
// (tests/retrieval/term_counter_test.cpp).
//
// Thread-safety: none; one counter per thread (the stemmer keeps state between calls).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ragd::retrieval {

class TermCounter {
 public:
  // `stopwords`: lower-case words never indexed (the list must outlive the counter).
  explicit TermCounter(std::span<const char* const> stopwords);
  ~TermCounter();
  TermCounter(const TermCounter&) = delete;
  TermCounter& operator=(const TermCounter&) = delete;

  // Forgets the counted terms (the stem cache stays).
  void clear();
  // Counts the terms of `text`, each occurrence adding `wdf_inc`.
  void add_text(std::string_view text, unsigned wdf_inc = 1);
  // The counted terms with their within-document frequencies, sorted by term.
  std::vector<std::pair<std::string, uint32_t>> terms() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::retrieval
