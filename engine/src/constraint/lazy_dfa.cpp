#include "lazy_dfa.h"

#include <algorithm>

#include <fmt/format.h>

#include "nfa_builder.h"

namespace ragd::engine::constraint {

LazyDfa::LazyDfa(const ByteNfa& nfa, size_t max_states) : nfa_(nfa), max_states_(max_states), seen_(nfa.nodes.size(), 0) {
  std::array<bool, 257> split{};
  for (const auto& n : nfa.nodes)
    for (const auto& e : n.edges) split[e.lo] = split[static_cast<size_t>(e.hi) + 1] = true;
  int c = -1;
  for (int b = 0; b < 256; ++b) {
    if (b == 0 || split[static_cast<size_t>(b)]) ++c;
    cls_[static_cast<size_t>(b)] = static_cast<uint8_t>(c);
  }
  ncls_ = static_cast<size_t>(c + 1);
  class_byte_.assign(ncls_, 0);
  for (int b = 255; b >= 0; --b) class_byte_[cls_[static_cast<size_t>(b)]] = static_cast<uint8_t>(b);
  std::vector<int32_t> start{nfa.start};
  std::vector<int32_t> stack{nfa.start};
  seen_[static_cast<size_t>(nfa.start)] = 1;
  while (!stack.empty()) {
    const int32_t a = stack.back();
    stack.pop_back();
    for (int32_t b : nfa.nodes[static_cast<size_t>(a)].eps)
      if (!seen_[static_cast<size_t>(b)]) seen_[static_cast<size_t>(b)] = 1, start.push_back(b), stack.push_back(b);
  }
  for (int32_t s : start) seen_[static_cast<size_t>(s)] = 0;
  std::sort(start.begin(), start.end());
  intern(start);
}

int32_t LazyDfa::intern(std::vector<int32_t>& set) {
  std::string key(reinterpret_cast<const char*>(set.data()), set.size() * sizeof(int32_t));
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  if (sets_.size() >= max_states_)
    throw GrammarError(fmt::format("the constraint's automaton grew past {} states", max_states_));
  const auto id = static_cast<int32_t>(sets_.size());
  uint8_t f = 0;
  for (int32_t a : set) {
    if (a == nfa_.accept) f |= kAccepting;
    if (!nfa_.nodes[static_cast<size_t>(a)].edges.empty()) f |= kContinues;
  }
  flags_.push_back(f);
  sets_.push_back(set);
  trans_.resize(sets_.size() * ncls_, kUnknown);
  index_.emplace(std::move(key), id);
  return id;
}

int32_t LazyDfa::build(int32_t s, uint8_t byte) {
  std::vector<int32_t> next, stack;
  for (int32_t a : sets_[static_cast<size_t>(s)])
    for (const auto& e : nfa_.nodes[static_cast<size_t>(a)].edges)
      if (byte >= e.lo && byte <= e.hi && !seen_[static_cast<size_t>(e.to)])
        seen_[static_cast<size_t>(e.to)] = 1, next.push_back(e.to), stack.push_back(e.to);
  while (!stack.empty()) {
    const int32_t a = stack.back();
    stack.pop_back();
    for (int32_t b : nfa_.nodes[static_cast<size_t>(a)].eps)
      if (!seen_[static_cast<size_t>(b)]) seen_[static_cast<size_t>(b)] = 1, next.push_back(b), stack.push_back(b);
  }
  for (int32_t a : next) seen_[static_cast<size_t>(a)] = 0;
  int32_t t = kDead;
  if (!next.empty()) {
    std::sort(next.begin(), next.end());
    t = intern(next);
  }
  trans_[static_cast<size_t>(s) * ncls_ + cls_[byte]] = t;
  return t;
}

}  // namespace ragd::engine::constraint
