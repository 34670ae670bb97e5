// Building byte-level NFAs from fragments (Thompson construction), with Unicode code point sets
// turned into their UTF-8 byte sequences. Used by every grammar kind.
// Thread-safety: a builder is used by one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/utf8.h"  // append_utf8: byte ranges of code point ranges
#include "ragd/engine/grammar.h"

namespace ragd::engine::constraint {

// Inside the constraint unit errors are thrown as GrammarError and turned into an InvalidArgument
// at compile_grammar().
struct GrammarError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Sorted, disjoint, non-adjacent closed ranges of code points.
using CodePointSet = std::vector<std::pair<uint32_t, uint32_t>>;
inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
CodePointSet normalize(CodePointSet s);
CodePointSet complement(const CodePointSet& s);  // within [0, kMaxCodePoint]
CodePointSet intersect(const CodePointSet& a, const CodePointSet& b);
CodePointSet unite(CodePointSet a, const CodePointSet& b);
// Code points that can stand unescaped inside a JSON string: U+0020.. except '"' and '\',
// surrogates excluded.
const CodePointSet& json_unescaped_chars();

struct Frag {
  int32_t in = 0, out = 0;
};

class NfaBuilder {
 public:
  explicit NfaBuilder(size_t max_nodes) : max_nodes_(max_nodes) {}
  int32_t node();
  void edge(int32_t a, uint8_t lo, uint8_t hi, int32_t b);
  void eps(int32_t a, int32_t b);

  Frag empty();
  Frag never();  // accepts nothing (its in and out are not connected)
  Frag byte_range(uint8_t lo, uint8_t hi);
  Frag literal(std::string_view bytes);
  Frag seq(const std::vector<Frag>& parts);
  Frag alt(const std::vector<Frag>& parts);
  Frag opt(Frag f);
  Frag star(Frag f);
  // `make` is called once per copy needed: min copies, then up to max (max < 0: unbounded).
  Frag repeat(const std::function<Frag()>& make, int min, int max);
  // Any one code point of `set`, UTF-8 encoded (surrogates never).
  Frag code_points(const CodePointSet& set);

  size_t size() const { return nfa_.nodes.size(); }
  // The NFA of `top`, trimmed to the nodes that are reachable from the start and reach the accepting
  // node. GrammarError when nothing is accepted.
  ByteNfa finish(Frag top);

 private:
  void utf8_range(int32_t from, int32_t to, uint32_t lo, uint32_t hi);
  size_t max_nodes_;
  ByteNfa nfa_;
  std::vector<int32_t> tail_;  // code_points(): shared continuation-byte tails of the current fragment
};

}  // namespace ragd::engine::constraint
