// Typed JSON field access for request bodies.
#include "json_fields.h"

#include <cmath>
#include <cstdio>
#include <random>

namespace ragd::daemon {

simdjson::dom::parser& body_parser(size_t bytes, std::unique_ptr<simdjson::dom::parser>* own) {
  thread_local simdjson::dom::parser shared;
  if (bytes <= kOwnParserBytes) return shared;
  *own = std::make_unique<simdjson::dom::parser>();
  return **own;
}

ApiError JsonBody::parse(const std::string& body) {
  if (body.empty()) return bad_request("", "request body is empty; expected a JSON object");
  simdjson::dom::parser& parser = body_parser(body.size(), &own_);
  simdjson::dom::element doc;
  auto err = parser.parse(body.data(), body.size(), true).get(doc);
  if (err) return {400, "invalid_json", std::string("malformed JSON: ") + simdjson::error_message(err), "", {}};
  if (doc.get_object().get(obj_)) return {400, "invalid_json", "request body must be a JSON object", "", {}};
  return {};
}

namespace {
const char* type_of(const simdjson::dom::element& e) {
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: return "array";
    case simdjson::dom::element_type::OBJECT: return "object";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64: return "integer";
    case simdjson::dom::element_type::DOUBLE: return "number";
    case simdjson::dom::element_type::STRING: return "string";
    case simdjson::dom::element_type::BOOL: return "boolean";
    case simdjson::dom::element_type::NULL_VALUE: return "null";
  }
  return "?";
}
}  // namespace

std::optional<simdjson::dom::element> Fields::get(const char* key) const {
  simdjson::dom::element e;
  if (obj_[key].get(e)) return std::nullopt;
  if (e.is_null()) return std::nullopt;
  return e;
}

bool Fields::has(const char* key) const { return get(key).has_value(); }

ApiError Fields::str(const char* key, std::string* out, bool required) const {
  auto e = get(key);
  if (!e) return required ? bad_request(name(key), "field '" + name(key) + "' is required") : ApiError{};
  std::string_view sv;
  if (e->get_string().get(sv))
    return bad_request(name(key), "field '" + name(key) + "' must be a string, got " + type_of(*e));
  *out = std::string(sv);
  return {};
}

ApiError Fields::integer(const char* key, int64_t* out, int64_t lo, int64_t hi, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  int64_t v = 0;
  if (e->type() == simdjson::dom::element_type::DOUBLE) {
    double d = 0;
    if (e->get_double().get(d)) d = 0.5;
    if (d != std::floor(d) || std::fabs(d) > 9e15)
      return bad_request(name(key), "field '" + name(key) + "' must be an integer, got " + std::to_string(d));
    v = static_cast<int64_t>(d);
  } else if (e->get_int64().get(v)) {
    if (e->type() == simdjson::dom::element_type::UINT64)
      return bad_request(name(key), "field '" + name(key) + "' is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return bad_request(name(key), "field '" + name(key) + "' must be an integer, got " + type_of(*e));
  }
  if (v < lo || v > hi)
    return bad_request(name(key), "field '" + name(key) + "' is out of range [" + std::to_string(lo) + ", " +
                                      std::to_string(hi) + "], got " + std::to_string(v));
  *out = v;
  if (present) *present = true;
  return {};
}

ApiError Fields::uinteger(const char* key, uint64_t* out, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  int64_t sv = 0;
  if (e->get_uint64().get(*out)) {
    if (!e->get_int64().get(sv))
      return bad_request(name(key), "field '" + name(key) + "' must be >= 0, got " + std::to_string(sv));
    return bad_request(name(key), "field '" + name(key) + "' must be a non-negative integer, got " + type_of(*e));
  }
  if (present) *present = true;
  return {};
}

ApiError Fields::number(const char* key, double* out, double lo, double hi, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  double v = 0;
  if (e->type() == simdjson::dom::element_type::BOOL || e->get_double().get(v))
    return bad_request(name(key), "field '" + name(key) + "' must be a number, got " + type_of(*e));
  if (!(v >= lo && v <= hi)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "' is out of range [%g, %g], got %g", lo, hi, v);
    return bad_request(name(key), "field '" + name(key) + buf);
  }
  *out = v;
  if (present) *present = true;
  return {};
}

ApiError Fields::seed(const char* key, uint64_t* out, bool* present) const {
  *present = false;
  auto e = get(key);
  if (!e) return {};
  int64_t sv = 0;
  if (e->type() == simdjson::dom::element_type::INT64 && !e->get_int64().get(sv) && sv == -1) {
    std::random_device rd;
    *out = static_cast<uint64_t>(rd()) << 32 ^ rd();
    *present = true;
    return {};
  }
  if (!e->get_uint64().get(*out)) {
    *present = true;
    return {};
  }
  std::string got = type_of(*e);
  if (e->type() == simdjson::dom::element_type::INT64 && !e->get_int64().get(sv)) got = std::to_string(sv);
  return bad_request(name(key), "field '" + name(key) + "' must be an integer in [0, 18446744073709551615] or -1 (a "
                                "random seed), got " + got);
}

ApiError Fields::boolean(const char* key, bool* out, bool* present) const {
  if (present) *present = false;
  auto e = get(key);
  if (!e) return {};
  if (e->get_bool().get(*out))
    return bad_request(name(key), "field '" + name(key) + "' must be a boolean, got " + type_of(*e));
  if (present) *present = true;
  return {};
}

ApiError Fields::only(std::initializer_list<const char*> allowed) const {
  return only([&](std::string_view k) {
    for (const char* a : allowed)
      if (k == a) return true;
    return false;
  });
}

ApiError Fields::only(const std::function<bool(std::string_view)>& allowed) const {
  for (auto [k, v] : obj_) {
    const bool ok = allowed(k);
    if (!ok) {
      const std::string field = clip_input(prefix_ + std::string(k));
      return bad_request(field, "unknown field '" + field + "'");
    }
  }
  return {};
}

std::string percent_decode(std::string_view s, bool* ok) {
  *ok = true;
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      if (i + 2 >= s.size()) {
        *ok = false;
        return {};
      }
      int a = hex(s[i + 1]), b = hex(s[i + 2]);
      if (a < 0 || b < 0) {
        *ok = false;
        return {};
      }
      out += static_cast<char>(a * 16 + b);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

ApiError Fields::string_list(const char* key, std::vector<std::string>* out) const {
  auto el = get(key);
  if (!el) return {};
  const std::string n = name(key);
  std::string_view sv;
  simdjson::dom::array arr;
  if (!el->get_string().get(sv)) {
    out->emplace_back(sv);
  } else if (!el->get_array().get(arr)) {
    for (auto s : arr) {
      if (s.get_string().get(sv)) return bad_request(n, "field '" + n + "' must be a string or an array of strings");
      out->emplace_back(sv);
    }
  } else {
    return bad_request(n, "field '" + n + "' must be a string or an array of strings");
  }
  return {};
}

}  // namespace ragd::daemon
