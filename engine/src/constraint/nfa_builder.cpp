#include "nfa_builder.h"

#include <algorithm>
#include <deque>

#include <fmt/format.h>

namespace ragd::engine::constraint {

CodePointSet normalize(CodePointSet s) {
  std::sort(s.begin(), s.end());
  CodePointSet out;
  for (auto [lo, hi] : s) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

CodePointSet complement(const CodePointSet& s) {
  CodePointSet out;
  uint32_t next = 0;
  for (auto [lo, hi] : normalize(s)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

CodePointSet intersect(const CodePointSet& a, const CodePointSet& b) {
  CodePointSet out;
  for (auto [alo, ahi] : a)
    for (auto [blo, bhi] : b) {
      const uint32_t lo = std::max(alo, blo), hi = std::min(ahi, bhi);
      if (lo <= hi) out.emplace_back(lo, hi);
    }
  return normalize(out);
}

CodePointSet unite(CodePointSet a, const CodePointSet& b) {
  a.insert(a.end(), b.begin(), b.end());
  return normalize(std::move(a));
}

const CodePointSet& json_unescaped_chars() {
  static const CodePointSet s = normalize({{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0xD7FF}, {0xE000, kMaxCodePoint}});
  return s;
}

int32_t NfaBuilder::node() {
  if (nfa_.nodes.size() >= max_nodes_)
    throw GrammarError(fmt::format("the automaton exceeds {} states (lower maxLength / maxItems / nesting)", max_nodes_));
  nfa_.nodes.emplace_back();
  return static_cast<int32_t>(nfa_.nodes.size() - 1);
}

void NfaBuilder::edge(int32_t a, uint8_t lo, uint8_t hi, int32_t b) { nfa_.nodes[a].edges.push_back({lo, hi, b}); }
void NfaBuilder::eps(int32_t a, int32_t b) { nfa_.nodes[a].eps.push_back(b); }

Frag NfaBuilder::empty() {
  const int32_t n = node();
  return {n, n};
}

Frag NfaBuilder::never() { return {node(), node()}; }

Frag NfaBuilder::byte_range(uint8_t lo, uint8_t hi) {
  Frag f{node(), node()};
  edge(f.in, lo, hi, f.out);
  return f;
}

Frag NfaBuilder::literal(std::string_view bytes) {
  Frag f = empty();
  for (char c : bytes) {
    const int32_t n = node();
    edge(f.out, static_cast<uint8_t>(c), static_cast<uint8_t>(c), n);
    f.out = n;
  }
  return f;
}

Frag NfaBuilder::seq(const std::vector<Frag>& parts) {
  if (parts.empty()) return empty();
  Frag f = parts.front();
  for (size_t i = 1; i < parts.size(); ++i) {
    eps(f.out, parts[i].in);
    f.out = parts[i].out;
  }
  return f;
}

Frag NfaBuilder::alt(const std::vector<Frag>& parts) {
  Frag f{node(), node()};
  for (const Frag& p : parts) {
    eps(f.in, p.in);
    eps(p.out, f.out);
  }
  return f;
}

Frag NfaBuilder::opt(Frag f) {
  Frag o{node(), node()};
  eps(o.in, f.in);
  eps(f.out, o.out);
  eps(o.in, o.out);
  return o;
}

Frag NfaBuilder::star(Frag f) {
  Frag o{node(), node()};
  eps(o.in, f.in);
  eps(f.out, o.in);
  eps(o.in, o.out);
  return o;
}

Frag NfaBuilder::repeat(const std::function<Frag()>& make, int min, int max) {
  std::vector<Frag> parts;
  for (int i = 0; i < min; ++i) parts.push_back(make());
  if (max < 0) {
    parts.push_back(star(make()));
  } else if (max > min) {
    // Up to (max - min) more: every copy may be the last.
    Frag tail{node(), node()};
    int32_t at = tail.in;
    for (int i = min; i < max; ++i) {
      eps(at, tail.out);
      Frag c = make();
      eps(at, c.in);
      at = c.out;
    }
    eps(at, tail.out);
    parts.push_back(tail);
  }
  return seq(parts);
}

// UTF-8 encodings of the code points [lo, hi] (one UTF-8 length, one shared-prefix shape at a time)
// as paths from `from` to `to`.
void NfaBuilder::utf8_range(int32_t from, int32_t to, uint32_t lo, uint32_t hi) {
  static constexpr uint32_t kLenMax[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (uint32_t m : kLenMax) {
    if (lo <= m && hi > m) {
      utf8_range(from, to, lo, m);
      utf8_range(from, to, m + 1, hi);
      return;
    }
  }
  if (hi <= 0x7F) {
    edge(from, static_cast<uint8_t>(lo), static_cast<uint8_t>(hi), to);
    return;
  }
  const int n = hi <= 0x7FF ? 2 : hi <= 0xFFFF ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_range(from, to, lo, lo | m);
        utf8_range(from, to, (lo | m) + 1, hi);
        return;
      }
      if ((hi & m) != m) {
        utf8_range(from, to, lo, (hi & ~m) - 1);
        utf8_range(from, to, hi & ~m, hi);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  // Trailing full continuation bytes (80-BF) go through the fragment's shared tail nodes: tail_[k]
  // reaches `to` after k of them (most multi-byte ranges end that way).
  size_t full = 0;
  while (full + 1 < a.size() && static_cast<uint8_t>(a[a.size() - 1 - full]) == 0x80 &&
         static_cast<uint8_t>(b[b.size() - 1 - full]) == 0xBF)
    ++full;
  auto tail = [&](size_t k) {
    while (tail_.size() <= k) {
      if (tail_.empty()) {
        tail_.push_back(to);
        continue;
      }
      const int32_t n = node();
      edge(n, 0x80, 0xBF, tail_.back());
      tail_.push_back(n);
    }
    return tail_[k];
  };
  int32_t at = from;
  const size_t lead = a.size() - full;
  for (size_t k = 0; k < lead; ++k) {
    const int32_t nx = k + 1 == lead ? tail(full) : node();
    edge(at, static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]), nx);
    at = nx;
  }
}

Frag NfaBuilder::code_points(const CodePointSet& set) {
  Frag f{node(), node()};
  tail_.clear();
  for (auto [lo, hi] : intersect(set, CodePointSet{{0, 0xD7FF}, {0xE000, kMaxCodePoint}})) utf8_range(f.in, f.out, lo, hi);
  tail_.clear();
  return f;
}

ByteNfa NfaBuilder::finish(Frag top) {
  const size_t n = nfa_.nodes.size();
  // Forward reachability from the start, backward from the accepting node.
  std::vector<std::vector<int32_t>> rev(n);
  for (size_t a = 0; a < n; ++a) {
    for (const auto& e : nfa_.nodes[a].edges) rev[e.to].push_back(static_cast<int32_t>(a));
    for (int32_t b : nfa_.nodes[a].eps) rev[b].push_back(static_cast<int32_t>(a));
  }
  auto walk = [n](int32_t from, auto&& next) {
    std::vector<char> seen(n, 0);
    std::vector<int32_t> stack{from};
    seen[from] = 1;
    while (!stack.empty()) {
      const int32_t a = stack.back();
      stack.pop_back();
      next(a, [&](int32_t b) {
        if (!seen[b]) seen[b] = 1, stack.push_back(b);
      });
    }
    return seen;
  };
  const auto fwd = walk(top.in, [&](int32_t a, auto&& push) {
    for (const auto& e : nfa_.nodes[a].edges) push(e.to);
    for (int32_t b : nfa_.nodes[a].eps) push(b);
  });
  const auto bwd = walk(top.out, [&](int32_t a, auto&& push) {
    for (int32_t b : rev[a]) push(b);
  });
  if (!fwd[top.out]) throw GrammarError("no output satisfies the constraint");
  std::vector<int32_t> id(n, -1);
  ByteNfa out;
  for (size_t a = 0; a < n; ++a)
    if (fwd[a] && bwd[a]) id[a] = static_cast<int32_t>(out.nodes.size()), out.nodes.emplace_back();
  for (size_t a = 0; a < n; ++a) {
    if (id[a] < 0) continue;
    ByteNfa::Node& dst = out.nodes[id[a]];
    for (const auto& e : nfa_.nodes[a].edges)
      if (id[e.to] >= 0) dst.edges.push_back({e.lo, e.hi, id[e.to]});
    for (int32_t b : nfa_.nodes[a].eps)
      if (id[b] >= 0) dst.eps.push_back(id[b]);
  }
  out.start = id[top.in];
  out.accept = id[top.out];
  return out;
}

}  // namespace ragd::engine::constraint
