// Python 3 str semantics over UTF-8 (see text.h). Case mapping and character classes come from
// ICU (root locale, full mappings: 'ß'.upper() == 'SS' as in Python).
#include "jinja/text.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace ragd::engine::jinja::text {

namespace {

// The character at s[i] in *out; returns its byte length (an invalid byte: U+FFFD, length 1).
size_t decode_one(std::string_view s, size_t i, char32_t* out) {
  size_t n;
  *out = utf8_decode_at(s, i, &n);
  return n;
}

icu::UnicodeString to_icu(std::string_view s) {
  return icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
}

std::string from_icu(const icu::UnicodeString& u) {
  std::string out;
  u.toUTF8String(out);
  return out;
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::string full_title(char32_t c) {
  if (c < 0x80) return std::string(1, static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
  icu::UnicodeString u(static_cast<UChar32>(c));
  u.toTitle(nullptr, icu::Locale::getRoot(), U_TITLECASE_NO_LOWERCASE | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  return from_icu(u);
}

std::string full_lower(char32_t c) {
  if (c < 0x80) return std::string(1, static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  icu::UnicodeString u(static_cast<UChar32>(c));
  u.toLower(icu::Locale::getRoot());
  return from_icu(u);
}

std::string full_upper(char32_t c) {
  if (c < 0x80) return std::string(1, static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c));
  icu::UnicodeString u(static_cast<UChar32>(c));
  u.toUpper(icu::Locale::getRoot());
  return from_icu(u);
}

bool is_cased(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED); }
bool is_lower_cp(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_LOWERCASE); }
bool is_upper_cp(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_UPPERCASE); }
bool is_title_cp(char32_t c) { return u_charType(static_cast<UChar32>(c)) == U_TITLECASE_LETTER; }
bool is_alpha_cp(char32_t c) {
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_UPPERCASE_LETTER:
    case U_LOWERCASE_LETTER:
    case U_TITLECASE_LETTER:
    case U_MODIFIER_LETTER:
    case U_OTHER_LETTER:
      return true;
    default:
      return false;
  }
}
int numeric_type(char32_t c) { return u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE); }
bool is_decimal_cp(char32_t c) { return numeric_type(c) == U_NT_DECIMAL; }
bool is_digit_cp(char32_t c) { return numeric_type(c) == U_NT_DECIMAL || numeric_type(c) == U_NT_DIGIT; }
bool is_numeric_cp(char32_t c) { return numeric_type(c) != U_NT_NONE; }

// Byte offsets of each code point start, plus s.size() at the end.
std::vector<size_t> cp_offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    off.push_back(i);
    char32_t c;
    i += decode_one(s, i, &c);
  }
  off.push_back(s.size());
  return off;
}

}  // namespace

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t space_prefix(std::string_view s, size_t from) {
  size_t i = from;
  while (i < s.size()) {
    char32_t c;
    const size_t n = decode_one(s, i, &c);
    if (!is_space(c)) break;
    i += n;
  }
  return i - from;
}

size_t space_suffix_start(std::string_view s, size_t end) {
  size_t i = end;
  while (i > 0) {
    size_t b = i - 1;
    while (b > 0 && utf8_continuation(s[b]) && i - b < 4) --b;
    char32_t c;
    if (decode_one(s, b, &c) != i - b || !is_space(c)) break;
    i = b;
  }
  return i;
}

std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  if (!chars) {
    size_t b = left ? space_prefix(s, 0) : 0;
    size_t e = right ? space_suffix_start(s, s.size()) : s.size();
    if (e < b) e = b;
    return std::string(s.substr(b, e - b));
  }
  const std::u32string set = utf8_decode(*chars);
  const std::u32string u = utf8_decode(s);
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && set.find(u[b]) != std::u32string::npos) ++b;
  if (right)
    while (e > b && set.find(u[e - 1]) != std::u32string::npos) --e;
  return utf8_encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (!sep) {
    size_t i = space_prefix(s, 0);
    while (i < s.size()) {
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        out.emplace_back(s.substr(i));
        return out;
      }
      size_t j = i;
      while (j < s.size()) {
        char32_t c;
        const size_t n = decode_one(s, j, &c);
        if (is_space(c)) break;
        j += n;
      }
      out.emplace_back(s.substr(i, j - i));
      i = j + space_prefix(s, j);
    }
    return out;
  }
  size_t i = 0;
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    const size_t j = s.find(*sep, i);
    if (j == std::string_view::npos) break;
    out.emplace_back(s.substr(i, j - i));
    i = j + sep->size();
  }
  out.emplace_back(s.substr(i));
  return out;
}

std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (maxsplit < 0) maxsplit = INT64_MAX;
  if (!sep) {
    size_t e = space_suffix_start(s, s.size());
    while (e > 0) {
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        out.emplace_back(s.substr(0, e));
        break;
      }
      // the word ends at e; find its start
      size_t b = e;
      while (b > 0) {
        size_t p = b - 1;
        while (p > 0 && utf8_continuation(s[p]) && b - p < 4) --p;
        char32_t c;
        if (decode_one(s, p, &c) == b - p && is_space(c)) break;
        b = p;
      }
      out.emplace_back(s.substr(b, e - b));
      e = space_suffix_start(s, b);
    }
    return {out.rbegin(), out.rend()};
  }
  size_t e = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (e < sep->size()) break;
    const size_t j = s.rfind(*sep, e - sep->size());
    if (j == std::string_view::npos) break;
    out.emplace_back(s.substr(j + sep->size(), e - j - sep->size()));
    e = j;
  }
  out.emplace_back(s.substr(0, e));
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    char32_t c;
    const size_t n = decode_one(s, i, &c);
    if (is_line_break(c)) {
      size_t end = i + n;
      if (c == '\r' && end < s.size() && s[end] == '\n') ++end;
      out.emplace_back(s.substr(start, (keepends ? end : i) - start));
      start = i = end;
    } else {
      i += n;
    }
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  if (count < 0) count = INT64_MAX;
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    const std::vector<size_t> off = cp_offsets(s);
    int64_t done = 0;
    for (size_t k = 0; k + 1 < off.size(); ++k) {
      if (done < count) out += repl, ++done;
      out.append(s.substr(off[k], off[k + 1] - off[k]));
    }
    if (done < count) out += repl;
    return out;
  }
  size_t i = 0;
  int64_t done = 0;
  while (done < count) {
    const size_t j = s.find(old, i);
    if (j == std::string_view::npos) break;
    out.append(s.substr(i, j - i));
    out.append(repl);
    i = j + old.size();
    ++done;
  }
  out.append(s.substr(i));
  return out;
}

int64_t find(std::string_view s, std::string_view sub, bool last) {
  const size_t j = last ? s.rfind(sub) : s.find(sub);
  if (j == std::string_view::npos) return -1;
  return static_cast<int64_t>(utf8_length(s.substr(0, j)));
}

int64_t count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(utf8_length(s)) + 1;
  int64_t n = 0;
  for (size_t i = s.find(sub); i != std::string_view::npos; i = s.find(sub, i + sub.size())) ++n;
  return n;
}

std::string upper(std::string_view s) {
  bool ascii = true;
  for (unsigned char c : s) ascii = ascii && c < 0x80;
  if (ascii) {
    std::string out(s);
    for (char& c : out)
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    return out;
  }
  icu::UnicodeString u = to_icu(s);
  u.toUpper(icu::Locale::getRoot());
  return from_icu(u);
}

std::string lower(std::string_view s) {
  bool ascii = true;
  for (unsigned char c : s) ascii = ascii && c < 0x80;
  if (ascii) {
    std::string out(s);
    for (char& c : out)
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    return out;
  }
  icu::UnicodeString u = to_icu(s);
  u.toLower(icu::Locale::getRoot());
  return from_icu(u);
}

std::string title(std::string_view s) {
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    i += decode_one(s, i, &c);
    out += previous_cased ? full_lower(c) : full_title(c);
    previous_cased = is_cased(c);
  }
  return out;
}

std::string capitalize(std::string_view s) {
  if (s.empty()) return {};
  char32_t c;
  const size_t n = decode_one(s, 0, &c);
  return full_title(c) + lower(s.substr(n));
}

std::string swapcase(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = decode_one(s, i, &c);
    if (is_upper_cp(c)) out += full_lower(c);
    else if (is_lower_cp(c)) out += full_upper(c);
    else out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

bool predicate(std::string_view name, std::string_view s, bool* known) {
  *known = true;
  const std::u32string u = utf8_decode(s);
  auto all = [&](auto f) {
    if (u.empty()) return false;
    for (char32_t c : u)
      if (!f(c)) return false;
    return true;
  };
  if (name == "isspace") return all(is_space);
  if (name == "isdigit") return all(is_digit_cp);
  if (name == "isdecimal") return all(is_decimal_cp);
  if (name == "isnumeric") return all(is_numeric_cp);
  if (name == "isalpha") return all(is_alpha_cp);
  if (name == "isalnum")
    return all([](char32_t c) { return is_alpha_cp(c) || is_decimal_cp(c) || is_digit_cp(c) || is_numeric_cp(c); });
  if (name == "islower" || name == "isupper") {
    const bool want_lower = name == "islower";
    bool cased = false;
    for (char32_t c : u) {
      if (want_lower ? (is_upper_cp(c) || is_title_cp(c)) : (is_lower_cp(c) || is_title_cp(c))) return false;
      if (want_lower ? is_lower_cp(c) : is_upper_cp(c)) cased = true;
    }
    return cased;
  }
  if (name == "istitle") {
    bool cased = false, previous_cased = false;
    for (char32_t c : u) {
      if (is_upper_cp(c) || is_title_cp(c)) {
        if (previous_cased) return false;
        previous_cased = cased = true;
      } else if (is_lower_cp(c)) {
        if (!previous_cased) return false;
        previous_cased = cased = true;
      } else {
        previous_cased = false;
      }
    }
    return cased;
  }
  *known = false;
  return false;
}

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

std::string repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    char32_t c;
    const size_t n = decode_one(s, i, &c);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c < 0x7F || is_printable(c)) {
      out.append(s.substr(i, n));
    } else if (c < 0x100) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c < 0x10000) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
    i += n;
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits, then Python's layout: positional when -4 <= exponent < 16.
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));
  const size_t epos = sci.find('e');
  std::string mant(sci.substr(0, epos));
  const int exp = std::atoi(std::string(sci.substr(epos + 1)).c_str());
  std::string sign;
  if (mant[0] == '-') sign = "-", mant.erase(0, 1);
  std::string digits;
  for (char c : mant)
    if (c != '.') digits.push_back(c);
  std::string out = sign;
  if (exp < -4 || exp >= 16) {
    out += digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += eb;
    return out;
  }
  if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    return out;
  }
  const size_t int_digits = static_cast<size_t>(exp) + 1;
  if (digits.size() <= int_digits) {
    out += digits + std::string(int_digits - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, int_digits) + "." + digits.substr(int_digits);
  }
  return out;
}

}  // namespace ragd::engine::jinja::text
