// Constrained decoding, step 1: a ConstraintSpec compiled to a byte-level automaton (an NFA over
// bytes with epsilon moves) that accepts exactly the outputs the spec allows. Independent of any
// vocabulary: token_constraint.h binds a Grammar to a tokenizer's vocabulary.
//
// Kinds form a registry (constraint/grammar_registry.cpp): json_schema, json_object, regex, tool_calls,
// choice; a kind is chosen by name. JSON Schema keywords supported and the limits of the
// automaton are listed in docs/api.md ("Structured output"); an unsupported keyword is an
// InvalidArgument naming it and its JSON pointer.
//
// Every node of a compiled Grammar can reach the accepting node (dead branches are trimmed), so a
// prefix the automaton accepts can always be completed.
// Thread-safety: a compiled Grammar is immutable; every const method is safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/constraint_spec.h"

namespace ragd::engine {

// A byte-level NFA. nodes[start] is the initial node, nodes[accept] the only accepting one.
struct ByteNfa {
  struct Edge {
    uint8_t lo = 0, hi = 0;  // the bytes [lo, hi] lead to `to`
    int32_t to = 0;
  };
  struct Node {
    std::vector<Edge> edges;
    std::vector<int32_t> eps;  // epsilon moves
  };
  std::vector<Node> nodes;
  int32_t start = 0;
  int32_t accept = 0;
};

class Grammar {
 public:
  Grammar(std::string kind, ByteNfa nfa) : kind_(std::move(kind)), nfa_(std::move(nfa)) {}
  const std::string& kind() const { return kind_; }
  const ByteNfa& nfa() const { return nfa_; }
  size_t num_nodes() const { return nfa_.nodes.size(); }

  // Reference semantics by direct NFA simulation (tests, and checks of the token automaton):
  // `text` is a complete output / a prefix of some complete output.
  bool accepts(std::string_view text) const;
  bool accepts_prefix(std::string_view text) const;

 private:
  std::string kind_;
  ByteNfa nfa_;
};

// Compiles `spec`. InvalidArgument naming the problem: an unknown kind (listing the kinds), a
// malformed schema or pattern, an unsupported keyword or construct (named, with where it is), an
// automaton over the size limit, a spec no output satisfies.
Result<std::shared_ptr<const Grammar>> compile_grammar(const ConstraintSpec& spec);

// The registered kinds ("json_schema", "json_object", "regex", "choice").
std::vector<std::string> grammar_kind_names();

}  // namespace ragd::engine
