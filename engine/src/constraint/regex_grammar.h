// Regular expressions (a subset of Python's `re` syntax) to NFA fragments, matched against the
// whole text: literals, `.`, classes `[a-z]` / `[^...]`, `\d \w \s \D \W \S`, escapes (`\n`, `\t`,
// `\xHH`, `\uHHHH`, punctuation), groups `(...)`, `(?:...)`, `(?P<name>...)`, alternation, the
// quantifiers `* + ? {n} {n,} {n,m} {,m}` (lazy forms too: same language), `^` at the start and
// `$` at the end. Anything else (backreferences, lookaround, `\b`, inline flags, possessive
// quantifiers) is a GrammarError naming it.
//
// The generated language is a subset of what Python matches, so `re.fullmatch` accepts every
// output: `\d` is [0-9], `\w` [A-Za-z0-9_], `\s` [ \t\n\r\f\v] (Python's also admit other Unicode
// digits, letters and spaces), and their complements (`\D`, a negated class holding one of them)
// stay within ASCII.
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "nfa_builder.h"

namespace ragd::engine::constraint {

// json_string: the characters are also limited to those that stand unescaped in a JSON string
// (a `pattern` of a JSON Schema string: the output is the string's raw bytes between the quotes).
// `where` prefixes error messages.
Frag emit_regex(NfaBuilder& b, std::string_view pattern, bool json_string, std::string_view where);

}  // namespace ragd::engine::constraint
