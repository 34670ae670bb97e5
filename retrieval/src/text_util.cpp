#include "ragd/retrieval/text_util.h"

#include <cstdint>
#include <cstdio>

namespace ragd::retrieval {

void append_json_string(std::string* out, std::string_view s) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      size_t l = utf8_sequence_length(s, i);
      if (l == 0) { out->append("\xEF\xBF\xBD"); ++i; continue; }
      out->append(s.substr(i, l));
      i += l;
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

}  // namespace ragd::retrieval
