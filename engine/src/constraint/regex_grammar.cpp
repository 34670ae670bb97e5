#include "regex_grammar.h"

#include <memory>

#include <fmt/format.h>

namespace ragd::engine::constraint {

namespace {

constexpr int kMaxRepeat = 10000;
constexpr int kMaxGroupDepth = 256;  // nested groups (the parser and the emitter recurse)

struct Re {
  enum class Kind : uint8_t { kSet, kSeq, kAlt, kRepeat };
  Kind kind = Kind::kSeq;
  CodePointSet set;       // kSet
  std::vector<Re> kids;   // kSeq, kAlt, kRepeat (one)
  int min = 0, max = 0;   // kRepeat (max < 0: unbounded)
};

const CodePointSet kDigit = {{'0', '9'}};
const CodePointSet kWord = normalize({{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}});
const CodePointSet kSpace = normalize({{'\t', '\r'}, {' ', ' '}});  // \t \n \v \f \r and space
// What Python's \s matches within ASCII (also the separators \x1c-\x1f): complements leave it out.
const CodePointSet kSpaceWide = normalize({{'\t', '\r'}, {0x1C, 0x1F}, {' ', ' '}});
const CodePointSet kAscii = {{0, 0x7F}};

class Parser {
 public:
  Parser(std::string_view pattern, std::string_view where) : where_(where) {
    // Code points of the pattern (it came from JSON: valid UTF-8).
    const std::u32string cps = utf8_decode(pattern);
    cps_.assign(cps.begin(), cps.end());
  }

  Re parse() {
    if (peek('^')) ++pos_;
    Re r = alternation();
    if (pos_ < cps_.size()) fail(fmt::format("unbalanced ')' at {}", pos_));
    return r;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw GrammarError(fmt::format("{}: {}", where_, what)); }
  bool peek(uint32_t c) const { return pos_ < cps_.size() && cps_[pos_] == c; }
  bool at_end() const { return pos_ >= cps_.size(); }

  Re alternation() {
    Re alt{Re::Kind::kAlt, {}, {}, 0, 0};
    alt.kids.push_back(sequence());
    while (peek('|')) {
      ++pos_;
      alt.kids.push_back(sequence());
    }
    return alt.kids.size() == 1 ? std::move(alt.kids[0]) : alt;
  }

  Re sequence() {
    Re seq{Re::Kind::kSeq, {}, {}, 0, 0};
    while (!at_end() && !peek('|') && !peek(')')) {
      if (peek('$') && pos_ + 1 == cps_.size()) {
        ++pos_;
        break;
      }
      Re atom_re = atom();
      seq.kids.push_back(quantified(std::move(atom_re)));
    }
    return seq;
  }

  static Re set_of(CodePointSet s) { return Re{Re::Kind::kSet, normalize(std::move(s)), {}, 0, 0}; }

  Re atom() {
    const uint32_t c = cps_[pos_++];
    switch (c) {
      case '(': {
        if (++depth_ > kMaxGroupDepth) fail(fmt::format("groups nested deeper than {}", kMaxGroupDepth));
        if (peek('?')) {
          ++pos_;
          if (peek(':')) {
            ++pos_;
          } else if (peek('P') && pos_ + 1 < cps_.size() && cps_[pos_ + 1] == '<') {
            while (!at_end() && !peek('>')) ++pos_;
            if (at_end()) fail("unterminated group name");
            ++pos_;
          } else {
            fail(fmt::format("group construct '(?{}' is not supported (lookaround, flags)",
                             at_end() ? std::string() : std::string(1, static_cast<char>(cps_[pos_]))));
          }
        }
        Re inner = alternation();
        if (!peek(')')) fail("missing ')'");
        ++pos_;
        --depth_;
        return inner;
      }
      case '[': return set_of(char_class());
      case '.': return set_of(complement({{'\n', '\n'}}));
      case '\\': return escape(false);
      case '*': case '+': case '?': fail(fmt::format("nothing to repeat at {}", pos_ - 1));
      case '^': fail("'^' is supported only at the start of the pattern");
      case '$': fail("'$' is supported only at the end of the pattern");
      default: return set_of({{c, c}});
    }
  }

  // After a backslash (pos_ at the escaped character). In a class, `shorthand` reports \d-like sets.
  Re escape(bool in_class, bool* shorthand = nullptr) {
    if (at_end()) fail("pattern ends with '\\'");
    const uint32_t c = cps_[pos_++];
    auto mark = [&]() {
      if (shorthand) *shorthand = true;
    };
    auto hex = [&](int n) {
      uint32_t v = 0;
      for (int k = 0; k < n; ++k) {
        if (at_end()) fail("truncated hex escape");
        const uint32_t h = cps_[pos_++];
        const int d = h >= '0' && h <= '9' ? int(h - '0') : h >= 'a' && h <= 'f' ? int(h - 'a' + 10) : h >= 'A' && h <= 'F' ? int(h - 'A' + 10) : -1;
        if (d < 0) fail("bad hex escape");
        v = v * 16 + static_cast<uint32_t>(d);
      }
      return v;
    };
    switch (c) {
      case 'd': mark(); return set_of(kDigit);
      case 'w': mark(); return set_of(kWord);
      case 's': mark(); return set_of(kSpace);
      case 'D': mark(); return set_of(intersect(complement(kDigit), kAscii));
      case 'W': mark(); return set_of(intersect(complement(kWord), kAscii));
      case 'S': mark(); return set_of(intersect(complement(kSpaceWide), kAscii));
      case 'n': return set_of({{'\n', '\n'}});
      case 't': return set_of({{'\t', '\t'}});
      case 'r': return set_of({{'\r', '\r'}});
      case 'f': return set_of({{'\f', '\f'}});
      case 'v': return set_of({{'\v', '\v'}});
      case 'x': { const uint32_t v = hex(2); return set_of({{v, v}}); }
      case 'u': { const uint32_t v = hex(4); return set_of({{v, v}}); }
      case 'U': { const uint32_t v = hex(8); if (v > kMaxCodePoint) fail("\\U escape out of range"); return set_of({{v, v}}); }
      default: break;
    }
    if (c == 'b' && in_class) return set_of({{'\b', '\b'}});
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
      fail(fmt::format("escape '\\{}' is not supported (backreferences, anchors, word boundaries)", static_cast<char>(c)));
    return set_of({{c, c}});
  }

  CodePointSet char_class() {
    bool negate = false;
    if (peek('^')) negate = true, ++pos_;
    CodePointSet s;
    bool shorthand = false;
    bool first = true;
    while (true) {
      if (at_end()) fail("unterminated character class");
      if (peek(']') && !first) {
        ++pos_;
        break;
      }
      first = false;
      CodePointSet item;
      uint32_t lo = 0;
      bool single = false;
      if (peek('\\')) {
        ++pos_;
        bool sh = false;
        Re e = escape(true, &sh);
        shorthand |= sh;
        if (!sh && e.set.size() == 1 && e.set[0].first == e.set[0].second) lo = e.set[0].first, single = true;
        else item = e.set;
      } else {
        if (peek('[') && pos_ + 1 < cps_.size() && cps_[pos_ + 1] == ':') fail("POSIX classes '[:...:]' are not supported");
        lo = cps_[pos_++];
        single = true;
      }
      if (single && peek('-') && pos_ + 1 < cps_.size() && cps_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi;
        if (peek('\\')) {
          ++pos_;
          bool sh = false;
          Re e = escape(true, &sh);
          if (sh || e.set.size() != 1 || e.set[0].first != e.set[0].second) fail("bad range in character class");
          hi = e.set[0].first;
        } else {
          hi = cps_[pos_++];
        }
        if (hi < lo) fail("bad character range (end before start)");
        item = {{lo, hi}};
      } else if (single) {
        item = {{lo, lo}};
      }
      s = unite(std::move(s), item);
    }
    if (!negate) return s;
    // Python's \d \w \s are wider than ours: their complement within ASCII (without the separators
    // Python's \s also matches) is a subset of Python's.
    if (shorthand) return intersect(complement(unite(s, kSpaceWide)), kAscii);
    return complement(s);
  }

  int number() {
    int v = 0;
    bool any = false;
    while (!at_end() && cps_[pos_] >= '0' && cps_[pos_] <= '9') {
      v = std::min(v * 10 + static_cast<int>(cps_[pos_] - '0'), kMaxRepeat + 1);
      ++pos_;
      any = true;
    }
    return any ? v : -1;
  }

  Re quantified(Re a) {
    while (!at_end()) {
      int mn, mx;
      const size_t at = pos_;
      const uint32_t c = cps_[pos_];
      if (c == '*') mn = 0, mx = -1, ++pos_;
      else if (c == '+') mn = 1, mx = -1, ++pos_;
      else if (c == '?') mn = 0, mx = 1, ++pos_;
      else if (c == '{') {
        ++pos_;
        const int lo = number();
        int hi = lo;
        if (peek(',')) {
          ++pos_;
          hi = number();
        }
        if (!peek('}') || (lo < 0 && hi < 0 && cps_[pos_ - 1] != ',')) {
          pos_ = at;  // not a quantifier: a literal '{' (as Python reads it)
          return a;
        }
        ++pos_;
        mn = lo < 0 ? 0 : lo;
        mx = hi;  // -1: unbounded
        if (mn > kMaxRepeat || mx > kMaxRepeat) fail(fmt::format("repetition count above {}", kMaxRepeat));
        if (mx >= 0 && mx < mn) fail("repetition {n,m} with m < n");
      } else {
        return a;
      }
      if (peek('?')) ++pos_;  // lazy: the same language
      else if (peek('+')) fail("possessive quantifiers are not supported");
      a = Re{Re::Kind::kRepeat, {}, {std::move(a)}, mn, mx};
    }
    return a;
  }

  std::string_view where_;
  std::vector<uint32_t> cps_;
  size_t pos_ = 0;
  int depth_ = 0;
};

Frag emit(NfaBuilder& b, const Re& r, bool json_string) {
  switch (r.kind) {
    case Re::Kind::kSet: {
      const CodePointSet s = json_string ? intersect(r.set, json_unescaped_chars()) : r.set;
      return s.empty() ? b.never() : b.code_points(s);
    }
    case Re::Kind::kSeq: {
      std::vector<Frag> parts;
      for (const Re& k : r.kids) parts.push_back(emit(b, k, json_string));
      return b.seq(parts);
    }
    case Re::Kind::kAlt: {
      std::vector<Frag> parts;
      for (const Re& k : r.kids) parts.push_back(emit(b, k, json_string));
      return b.alt(parts);
    }
    case Re::Kind::kRepeat:
      return b.repeat([&]() { return emit(b, r.kids[0], json_string); }, r.min, r.max);
  }
  return b.never();
}

}  // namespace

Frag emit_regex(NfaBuilder& b, std::string_view pattern, bool json_string, std::string_view where) {
  Parser p(pattern, where);
  const Re r = p.parse();
  return emit(b, r, json_string);
}

}  // namespace ragd::engine::constraint
