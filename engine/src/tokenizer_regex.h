// Regex: a compiled PCRE2 pattern used to split text into pre-tokens. Private to the engine.
// Thread-safety: immutable after compile; split() allocates its own match data, safe from any thread.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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
    r->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    return r;
  }
  ~Regex() {
    if (code_) pcre2_code_free(code_);
  }
  // Calls on_piece(begin, end, is_match) for matches and the gaps between them, in order.
  template <typename F>
  void split(std::string_view s, F&& on_piece) const {
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
      if (b > gap) on_piece(gap, b, false);
      on_piece(b, e, true);
      gap = pos = e;
    }
    if (gap < s.size()) on_piece(gap, s.size(), false);
    pcre2_match_data_free(md);
  }

 private:
  Regex() = default;
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace ragd::engine::bpe
