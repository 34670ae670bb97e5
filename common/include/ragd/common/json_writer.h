// JsonWriter: a small streaming JSON serializer for responses (JSON in is simdjson).
//
//   JsonWriter w; w.begin_object(); w.key("id").value("r1"); w.key("n").value(3); w.end_object();
//   w.str() == R"({"id":"r1","n":3})"
//
// Commas are inserted automatically. Strings are escaped per RFC 8259; invalid UTF-8 bytes are
// replaced by U+FFFD so the output is always valid JSON. Non-finite doubles are written as null.
// Thread-safety: none (one writer per response).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ragd {

class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(int64_t v);
  JsonWriter& value(uint64_t v);
  JsonWriter& value(double v);
  JsonWriter& value(float v) { return value(static_cast<double>(v)); }
  JsonWriter& null();
  // Inserts pre-serialized JSON (must be a valid value).
  JsonWriter& raw(std::string_view json);

  const std::string& str() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void sep();
  std::string out_;
  std::vector<bool> first_;  // per open container: no element written yet
  bool after_key_ = false;
};

// Appends `s` as a quoted, escaped JSON string.
void json_escape(std::string& out, std::string_view s);
// Returns `s` as a quoted, escaped JSON string.
inline std::string json_quote(std::string_view s) {
  std::string out;
  json_escape(out, s);
  return out;
}

}  // namespace ragd
