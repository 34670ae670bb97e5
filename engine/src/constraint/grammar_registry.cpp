// The grammar kinds, one row each: its name and how a spec of that kind becomes an NFA fragment.
// Adding a kind: a unit that emits its fragment, and one row here.
#include <algorithm>

#include <fmt/format.h>

#include "json_schema_grammar.h"
#include "nfa_builder.h"
#include "ragd/engine/grammar.h"
#include "regex_grammar.h"
#include "tool_call_grammar.h"

namespace ragd::engine {

namespace {

using constraint::Frag;
using constraint::GrammarError;
using constraint::NfaBuilder;

constexpr size_t kMaxNfaNodes = 2'000'000;
constexpr int kMaxWhitespace = 16;
constexpr size_t kMaxChoices = 4096;

struct GrammarKind {
  std::string_view name;
  Frag (*emit)(NfaBuilder&, const ConstraintSpec&);
};

const GrammarKind kKinds[] = {
    {"json_schema", [](NfaBuilder& b, const ConstraintSpec& s) { return constraint::emit_json_schema(b, s.source, s.max_whitespace); }},
    {"json_object", [](NfaBuilder& b, const ConstraintSpec& s) { return constraint::emit_json_object(b, s.max_whitespace); }},
    {"regex", [](NfaBuilder& b, const ConstraintSpec& s) { return constraint::emit_regex(b, s.source, false, "guided_regex"); }},
    {"choice",
     [](NfaBuilder& b, const ConstraintSpec& s) {
       if (s.choices.empty()) throw GrammarError("guided_choice: needs at least one choice");
       if (s.choices.size() > kMaxChoices) throw GrammarError(fmt::format("guided_choice: more than {} choices", kMaxChoices));
       std::vector<Frag> alts;
       for (const auto& c : s.choices) {
         if (c.empty()) throw GrammarError("guided_choice: a choice is empty");
         alts.push_back(b.literal(c));
       }
       return b.alt(alts);
     }},
    {"tool_calls", [](NfaBuilder& b, const ConstraintSpec& s) { return constraint::emit_tool_calls(b, s.source, s.max_whitespace); }},
};

// NFA simulation: the epsilon closure of `set` (in place, sorted, unique).
void closure(const ByteNfa& nfa, std::vector<int32_t>& set, std::vector<char>& seen) {
  std::vector<int32_t> stack(set.begin(), set.end());
  for (int32_t s : set) seen[s] = 1;
  while (!stack.empty()) {
    const int32_t a = stack.back();
    stack.pop_back();
    for (int32_t b : nfa.nodes[a].eps)
      if (!seen[b]) seen[b] = 1, set.push_back(b), stack.push_back(b);
  }
  for (int32_t s : set) seen[s] = 0;
  std::sort(set.begin(), set.end());
}

std::vector<int32_t> simulate(const ByteNfa& nfa, std::string_view text) {
  std::vector<char> seen(nfa.nodes.size(), 0);
  std::vector<int32_t> cur{nfa.start};
  closure(nfa, cur, seen);
  for (char ch : text) {
    const auto c = static_cast<uint8_t>(ch);
    std::vector<int32_t> next;
    for (int32_t a : cur)
      for (const auto& e : nfa.nodes[a].edges)
        if (c >= e.lo && c <= e.hi && !seen[e.to]) seen[e.to] = 1, next.push_back(e.to);
    for (int32_t s : next) seen[s] = 0;
    if (next.empty()) return {};
    closure(nfa, next, seen);
    cur = std::move(next);
  }
  return cur;
}

}  // namespace

bool Grammar::accepts(std::string_view text) const {
  const auto set = simulate(nfa_, text);
  return std::binary_search(set.begin(), set.end(), nfa_.accept);
}

bool Grammar::accepts_prefix(std::string_view text) const { return !simulate(nfa_, text).empty(); }

std::vector<std::string> grammar_kind_names() {
  std::vector<std::string> out;
  for (const auto& k : kKinds) out.emplace_back(k.name);
  return out;
}

Result<std::shared_ptr<const Grammar>> compile_grammar(const ConstraintSpec& spec) {
  const GrammarKind* kind = nullptr;
  for (const auto& k : kKinds)
    if (k.name == spec.kind) kind = &k;
  if (!kind) {
    std::string names;
    for (const auto& k : kKinds) names += (names.empty() ? "" : ", ") + std::string(k.name);
    return Status::InvalidArgument(fmt::format("unknown constraint kind '{}' (supported: {})", spec.kind, names));
  }
  if (spec.max_whitespace < 0 || spec.max_whitespace > kMaxWhitespace)
    return Status::InvalidArgument(fmt::format("whitespace bound {} outside 0..{}", spec.max_whitespace, kMaxWhitespace));
  try {
    NfaBuilder b(kMaxNfaNodes);
    const Frag top = kind->emit(b, spec);
    return std::make_shared<const Grammar>(std::string(kind->name), b.finish(top));
  } catch (const GrammarError& e) {
    return Status::InvalidArgument(e.what());
  } catch (const std::exception& e) {  // simdjson conversions of a value of the wrong type
    return Status::InvalidArgument(fmt::format("{}: {}", spec.kind, e.what()));
  }
}

}  // namespace ragd::engine
