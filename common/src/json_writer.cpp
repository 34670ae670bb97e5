#include "ragd/common/json_writer.h"

#include <cmath>
#include <cstdio>

#include "ragd/common/utf8.h"

namespace ragd {

void json_escape(std::string& out, std::string_view s) {
  out += '"';
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    // One UTF-8 sequence; invalid bytes become U+FFFD.
    if (const size_t len = utf8_sequence_length(s, i); len > 0) {
      out.append(s.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  out += '"';
}

void JsonWriter::sep() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_.empty()) {
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }
}

JsonWriter& JsonWriter::begin_object() {
  sep();
  out_ += '{';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_object() {
  out_ += '}';
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::begin_array() {
  sep();
  out_ += '[';
  first_.push_back(true);
  return *this;
}
JsonWriter& JsonWriter::end_array() {
  out_ += ']';
  first_.pop_back();
  return *this;
}
JsonWriter& JsonWriter::key(std::string_view k) {
  sep();
  json_escape(out_, k);
  out_ += ':';
  after_key_ = true;
  return *this;
}
JsonWriter& JsonWriter::value(std::string_view s) {
  sep();
  json_escape(out_, s);
  return *this;
}
JsonWriter& JsonWriter::value(bool b) {
  sep();
  out_ += b ? "true" : "false";
  return *this;
}
JsonWriter& JsonWriter::value(int64_t v) {
  sep();
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::value(uint64_t v) {
  sep();
  out_ += std::to_string(v);
  return *this;
}
JsonWriter& JsonWriter::value(double v) {
  sep();
  if (!std::isfinite(v)) {
    out_ += "null";
    return *this;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.7g", v);
  out_ += buf;
  return *this;
}
JsonWriter& JsonWriter::null() {
  sep();
  out_ += "null";
  return *this;
}
JsonWriter& JsonWriter::raw(std::string_view json) {
  sep();
  out_ += json;
  return *this;
}

}  // namespace ragd
