#include "ragd/common/echo.h"

#include "ragd/common/utf8.h"

namespace ragd {

std::string clip_input(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  // s[cut] is the first byte left out: while it continues a character, that character goes too.
  const size_t cut = utf8_floor(s, max_bytes);
  return std::string(s.substr(0, cut)) + "\u2026(" + std::to_string(s.size()) + " bytes)";
}

}  // namespace ragd
