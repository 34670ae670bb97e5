// The hand-written ASCII pre-tokenizer for Llama-3-family patterns must split exactly like PCRE2
// running the pattern itself, on random text built from the characters the pattern cares about.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer_regex.h"

using ragd::engine::bpe::Regex;

namespace {

const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string random_text(std::mt19937_64& rng, size_t n, bool with_unicode) {
  static const std::vector<std::string> atoms = {
      "a", "Z", "q", "7", "42", " ", "  ", "\n", "\r\n", "\t", "\v", "\f", "'", "'s", "'S", "'ll", "'LL", "'re", "'Ve",
      "'d", "'m", "'t", ".", ",", "!?", "-", "(", ")", "\"", "$", "\x01", "\x7f", "_", "word", "The", "12345", " x",
      "\n\n", " \n ", "\r"};
  static const std::vector<std::string> uni = {"\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xCC\x81", "\xE2\x80\x94",
                                               "\xC2\xA0"};
  std::string s;
  while (s.size() < n) {
    if (with_unicode && rng() % 10 == 0) s += uni[rng() % uni.size()];
    else s += atoms[rng() % atoms.size()];
  }
  return s;
}

std::vector<std::pair<size_t, size_t>> pieces_fast(const Regex& r, std::string_view s) {
  std::vector<std::pair<size_t, size_t>> v;
  r.split(s, [&](size_t b, size_t e, bool) { v.emplace_back(b, e); });
  return v;
}

std::vector<std::pair<size_t, size_t>> pieces_pcre(const Regex& r, std::string_view s) {
  std::vector<std::pair<size_t, size_t>> v;
  r.split_pcre(s, 0, [&](size_t b, size_t e, bool) { v.emplace_back(b, e); });
  return v;
}

}  // namespace

TEST(PreTokenizer, AsciiFastPathMatchesPcre2) {
  for (const char* pattern : {ragd::engine::bpe::kLlama3Pattern, kQwen2Pattern}) {
    auto r = Regex::compile(pattern);
    ASSERT_TRUE(r.ok());
    std::mt19937_64 rng(17);
    for (int it = 0; it < 3000; ++it) {
      const std::string s = random_text(rng, 1 + it % 80, it % 3 == 0);
      auto fast = pieces_fast(**r, s);
      auto ref = pieces_pcre(**r, s);
      ASSERT_EQ(fast, ref) << "pattern " << pattern << "\ntext: [" << s << "]";
    }
  }
}
