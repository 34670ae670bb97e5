// Private to the daemon: typed access to the fields of a parsed JSON request body (simdjson DOM).
// Every error names the offending field.
// Thread-safety: Fields is a view on a parsed document; JsonBody parses a small body with a
// thread-local parser.
#pragma once

#include <memory>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <simdjson.h>

#include "errors.h"

namespace ragd::daemon {

// Typed field access on a parsed JSON object. `null` counts as absent.
class Fields {
 public:
  explicit Fields(simdjson::dom::object obj, std::string prefix = "") : obj_(obj), prefix_(std::move(prefix)) {}
  bool has(const char* key) const;
  ApiError str(const char* key, std::string* out, bool required = false) const;
  ApiError integer(const char* key, int64_t* out, int64_t lo, int64_t hi, bool* present = nullptr) const;
  ApiError uinteger(const char* key, uint64_t* out, bool* present = nullptr) const;
  ApiError number(const char* key, double* out, double lo, double hi, bool* present = nullptr) const;
  ApiError boolean(const char* key, bool* out, bool* present = nullptr) const;
  // A sampling seed, the same on every route: an integer 0..2^64-1, or -1 = a random seed drawn
  // for this request (llama.cpp's convention); anything else is a 400 naming the field.
  ApiError seed(const char* key, uint64_t* out, bool* present) const;
  // "stop": a string or an array of strings, appended to `out`.
  ApiError string_list(const char* key, std::vector<std::string>* out) const;
  // Rejects keys not in `allowed` (typo protection on the ragd-native API).
  ApiError only(std::initializer_list<const char*> allowed) const;
  ApiError only(const std::function<bool(std::string_view)>& allowed) const;
  std::optional<simdjson::dom::element> get(const char* key) const;
  std::string name(const char* key) const { return prefix_ + key; }
  simdjson::dom::object object() const { return obj_; }

 private:
  simdjson::dom::object obj_;
  std::string prefix_;
};

// The parser for a body of `bytes`: this thread's for a small one (what it parses lives until the
// next parse on this thread), a parser of its own in `*own` for one over kOwnParserBytes, which
// goes with *own: simdjson's buffers are ~10x the body (a 4.5 MB body of a million token ids keeps
// ~50 MB), which a thread-local parser would hold for the thread's life.
inline constexpr size_t kOwnParserBytes = size_t{1} << 20;
simdjson::dom::parser& body_parser(size_t bytes, std::unique_ptr<simdjson::dom::parser>* own);

// A request body parsed as one JSON object (body_parser); the object lives while this does (and,
// for a small body, until the next parse on this thread).
class JsonBody {
 public:
  ApiError parse(const std::string& body);
  simdjson::dom::object object() const { return obj_; }

 private:
  std::unique_ptr<simdjson::dom::parser> own_;
  simdjson::dom::object obj_;
};

// "%2F" -> "/"; *ok false on a malformed escape.
std::string percent_decode(std::string_view s, bool* ok);

}  // namespace ragd::daemon
