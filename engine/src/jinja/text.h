// Python 3 str semantics over UTF-8 std::string: code-point indexing, str.isspace's whitespace,
// the str methods templates call, repr() of strings and floats.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/utf8.h"  // utf8_decode / utf8_encode / utf8_length: code points in and out

namespace ragd::engine::jinja::text {

// Python's str.isspace for one code point (the set str.split() and str.strip() use).
bool is_space(char32_t c);
// Whitespace (is_space) bytes starting at / ending at a byte offset.
size_t space_prefix(std::string_view s, size_t from);
size_t space_suffix_start(std::string_view s, size_t end);

// str.strip / lstrip / rstrip; chars nullopt: whitespace.
std::string strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split / rsplit; sep nullopt: runs of whitespace. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> rsplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit);
std::vector<std::string> splitlines(std::string_view s, bool keepends);
std::string replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
// Code-point index of the first / last occurrence at or after / before the code-point range, or -1.
int64_t find(std::string_view s, std::string_view sub, bool last);
int64_t count(std::string_view s, std::string_view sub);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string title(std::string_view s);       // str.title
std::string capitalize(std::string_view s);  // str.capitalize
std::string swapcase(std::string_view s);

// str.islower / isupper / isdigit / isalpha / isalnum / isspace / isnumeric / isdecimal / istitle.
bool predicate(std::string_view name, std::string_view s, bool* known);

bool is_printable(char32_t c);        // Python's str.isprintable for one code point
std::string repr(std::string_view s);   // repr() of a str, quotes included
std::string float_repr(double d);      // repr() of a float: 1.0, 1e+16, 1e-05, inf, nan

}  // namespace ragd::engine::jinja::text
