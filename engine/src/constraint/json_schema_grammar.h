// JSON Schema (and "any JSON") to NFA fragments. The output is compact JSON: properties in the
// schema's order (optional ones may be left out; properties a schema does not list are never
// produced), no exponents, at most `max_whitespace` whitespace bytes between two JSON tokens.
//
// Supported keywords (anything else is a GrammarError naming the keyword and its JSON pointer):
//   type (one or a list), properties, required, additionalProperties (false / true / a schema:
//   with no properties listed, a map of that schema), items, minItems, maxItems, uniqueItems
//   (false), enum, const, anyOf, oneOf (branches told apart by type, const / enum values or a
//   required property with const / enum values), allOf (one schema), $ref to "#", "#/$defs/..",
//   "#/definitions/.." (recursion expanded kMaxRefDepth times), $defs / definitions, minimum,
//   maximum, exclusiveMinimum, exclusiveMaximum (number or draft-4 boolean), minLength,
//   maxLength, pattern (regex_grammar.h, without minLength / maxLength / format), format (date,
//   time, date-time, uuid, email, ipv4); annotations are ignored (title, description, default,
//   examples, $schema, $id, $comment, deprecated, readOnly, writeOnly).
// Values a schema leaves open (`{}`, `true`, json_object) nest at most kMaxAnyDepth containers.
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "nfa_builder.h"

namespace ragd::engine::constraint {

inline constexpr int kMaxAnyDepth = 5;
inline constexpr int kMaxRefDepth = 3;
inline constexpr int kMaxStringLength = 10000;  // maxLength / minLength above this: GrammarError
inline constexpr int kMaxItems = 10000;

// The schema's JSON text. GrammarError on a malformed or unsupported schema.
Frag emit_json_schema(NfaBuilder& b, std::string_view schema_json, int max_whitespace);
// Any JSON object (OpenAI's json_object response format).
Frag emit_json_object(NfaBuilder& b, int max_whitespace);

}  // namespace ragd::engine::constraint
