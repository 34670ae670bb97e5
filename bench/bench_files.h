// Whole files of the benchmarks (pipeline specs, stamps, JSON results) through common/text_file.h:
// a file that cannot be written aborts the benchmark with its path instead of leaving it missing.
// Header-only, benchmark support. Thread-safety: pure functions.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "ragd/common/check.h"
#include "ragd/common/text_file.h"

namespace ragd::bench {

inline void write_file(const std::filesystem::path& p, std::string_view text) {
  const Status st = write_text_file(p.string(), text);
  RAGD_CHECK(st.ok()) << st.to_string();
}

// The file's bytes; "" when it cannot be read (a missing stamp is an old one).
inline std::string read_file_or_empty(const std::filesystem::path& p) {
  Result<std::string> text = read_text_file(p.string());
  return text.ok() ? std::move(*text) : std::string();
}

}  // namespace ragd::bench
