// Regex: a compiled PCRE2 pattern used to split text into pre-tokens. Private to the engine.
// Thread-safety: immutable after compile; split() allocates its own match data, safe from any thread.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <memory>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "bpe_model.h"
#include "ragd/common/status.h"

namespace ragd::engine::bpe {

// Llama-3 / tiktoken cl100k-style pre-tokenizer pattern.
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A compiled PCRE2 pattern (UTF + UCP, tolerant of invalid UTF-8 in the subject, JIT when available).
class Regex {
 public:
  static Result<std::shared_ptr<Regex>> compile(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof(buf));
      return Status::InvalidArgument(fmt::format("regex error at offset {}: {}", off, reinterpret_cast<char*>(buf)));
    }
    auto r = std::shared_ptr<Regex>(new Regex());
    r->code_ = code;
    r->fast_digits_ = llama3_family_digits(pattern);
    r->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return r;
  }
  ~Regex() {
    if (code_) pcre2_code_free(code_);
  }
  // Calls on_piece(begin, end, is_match) for matches and the gaps between them, in order.
  // Llama-3-family patterns take a hand-written path on ASCII lines (split_ascii_llama3, checked
  // against PCRE2 in tests); the text is cut only where no match can span (after a newline, before
  // an ASCII letter or digit).
  template <typename F>
  void split(std::string_view s, F&& on_piece) const {
    if (fast_digits_ == 0) {
      split_pcre(s, 0, on_piece);
      return;
    }
    size_t begin = 0;
    bool ascii = true;
    auto flush = [&](size_t end) {
      std::string_view chunk = s.substr(begin, end - begin);
      if (ascii) {
        split_ascii_llama3(chunk, fast_digits_, [&](size_t b, size_t e) { on_piece(begin + b, begin + e, true); });
      } else {
        split_pcre(chunk, begin, on_piece);
      }
    };
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x80) ascii = false;
      if (i > 0 && (s[i - 1] == '\n' || s[i - 1] == '\r') && ascii_alnum(c)) {
        flush(i);
        begin = i;
        ascii = c < 0x80;
      }
    }
    if (begin < s.size()) flush(s.size());
  }

  // Pre-tokenizes ASCII text exactly like the Llama-3 pattern with \p{N}{1,max_digits}:
  //   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,K} | ' '?[^\s\p{L}\p{N}]+[\r\n]*
  //   | \s*[\r\n]+ | \s+(?!\S) | \s+        (alternatives tried in order at each position)
  template <typename F>
  static void split_ascii_llama3(std::string_view s, int max_digits, F&& on_piece) {
    const size_t n = s.size();
    auto at = [&](size_t i) -> unsigned char { return i < n ? static_cast<unsigned char>(s[i]) : 0; };
    auto letter = [&](size_t i) { return i < n && ascii_letter(at(i)); };
    auto digit = [&](size_t i) { return i < n && at(i) >= '0' && at(i) <= '9'; };
    auto space = [&](size_t i) { return i < n && ascii_space(at(i)); };
    auto nl = [&](size_t i) { return i < n && (at(i) == '\r' || at(i) == '\n'); };
    auto punct = [&](size_t i) { return i < n && !ascii_space(at(i)) && !ascii_alnum(at(i)); };
    size_t i = 0;
    while (i < n) {
      size_t e = i;
      const unsigned char c = at(i);
      if (c == '\'') {  // contractions, case-insensitive
        const unsigned char a = static_cast<unsigned char>(std::tolower(at(i + 1)));
        const unsigned char b = static_cast<unsigned char>(std::tolower(at(i + 2)));
        if (a == 's' || a == 't' || a == 'm' || a == 'd') e = i + 2;
        else if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) e = i + 3;
      }
      if (e == i && !nl(i) && !letter(i) && !digit(i) && letter(i + 1)) {  // [^\r\n L N] L+
        e = i + 1;
        while (letter(e)) ++e;
      }
      if (e == i && letter(i)) {
        while (letter(e)) ++e;
      }
      if (e == i && digit(i)) {
        while (digit(e) && static_cast<int>(e - i) < max_digits) ++e;
      }
      if (e == i) {  // ' '? punct+ [\r\n]*
        size_t j = i;
        if (at(j) == ' ' && punct(j + 1)) ++j;
        if (punct(j)) {
          while (punct(j)) ++j;
          while (nl(j)) ++j;
          e = j;
        }
      }
      if (e == i && space(i)) {
        size_t j = i;
        while (space(j)) ++j;
        size_t last_nl = n;
        for (size_t k = i; k < j; ++k)
          if (nl(k)) last_nl = k;
        if (last_nl != n) e = last_nl + 1;        // \s*[\r\n]+
        else if (j == n) e = j;                   // \s+ at the end
        else if (j - i > 1) e = j - 1;            // \s+(?!\S): leave one space for the next word
        else e = j;                               // \s+
      }
      on_piece(i, e);
      i = e;
    }
  }

  // PCRE2 path; offsets passed to on_piece are shifted by base.
  template <typename F>
  void split_pcre(std::string_view s, size_t base, F&& on_piece) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t pos = 0, gap = 0;
    const auto* subj = reinterpret_cast<PCRE2_SPTR>(s.data());
    while (pos <= s.size()) {
      int rc = jit_ ? pcre2_jit_match(code_, subj, s.size(), pos, 0, md, nullptr)
                    : pcre2_match(code_, subj, s.size(), pos, 0, md, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      size_t b = ov[0], e = ov[1];
      if (e == b) {  // empty match: step one character
        pos = b + (b < s.size() ? utf8_char_len(s, b) : 1);
        continue;
      }
      if (b > gap) on_piece(base + gap, base + b, false);
      on_piece(base + b, base + e, true);
      gap = pos = e;
    }
    if (gap < s.size()) on_piece(base + gap, base + s.size(), false);
    pcre2_match_data_free(md);
  }

 private:
  Regex() = default;
  static bool ascii_letter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
  static bool ascii_alnum(unsigned char c) { return ascii_letter(c) || (c >= '0' && c <= '9'); }
  static bool ascii_space(unsigned char c) { return c == ' ' || (c >= 0x09 && c <= 0x0D); }
  // 3 for the Llama-3 pattern, 1 for Qwen2's, 0 for anything else (PCRE2 only).
  static int llama3_family_digits(std::string_view pattern) {
    const std::string_view head = R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|)";
    const std::string_view tail = R"(| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
    if (!pattern.starts_with(head) || !pattern.ends_with(tail)) return 0;
    const std::string_view mid = pattern.substr(head.size(), pattern.size() - head.size() - tail.size());
    if (mid == R"(\p{N}{1,3})") return 3;
    if (mid == R"(\p{N})") return 1;
    return 0;
  }
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
  int fast_digits_ = 0;
};

}  // namespace ragd::engine::bpe
