// What a request constrains its output to: a JSON Schema, any JSON object, a regular expression or
// a list of choices. A plain value type that travels from the daemon's request parsing through
// the run parameters (SamplingParams::constraint) to the engine, where compile_grammar() turns it
// into a byte-level automaton (grammar.h) and a ConstraintCache binds that to a vocabulary.
// Thread-safety: a value type; const access from any thread.
#pragma once

#include <string>
#include <vector>

namespace ragd::engine {

struct ConstraintSpec {
  // The grammar kind by name (grammar.h: grammar_kind_names()): "json_schema", "json_object",
  // "regex", "choice", "tool_calls".
  std::string kind;
  // json_schema: the schema as JSON text; regex: the pattern (Python `re` syntax subset, matched
  // against the whole output); tool_calls: the tools and the format as JSON
  // (constraint/tool_call_grammar.h); otherwise unused.
  std::string source;
  // choice: the output is exactly one of these strings.
  std::vector<std::string> choices;
  // JSON kinds: whitespace bytes (space, \n, \t) allowed between two JSON tokens. 0 (default) =
  // compact output; a bounded schema then has a bounded output.
  int max_whitespace = 0;
  // Where the spec came from ("response_format.json_schema.schema"): prefixes compile errors. Not
  // part of the cache key.
  std::string origin;

  // A key that identifies the spec for caching (every field, length-prefixed).
  std::string cache_key() const {
    std::string k;
    auto add = [&k](const std::string& s) {
      k += std::to_string(s.size());
      k += ':';
      k += s;
    };
    add(kind);
    add(source);
    k += std::to_string(choices.size()) + ';';
    for (const auto& c : choices) add(c);
    k += std::to_string(max_whitespace);
    return k;
  }
};

}  // namespace ragd::engine
