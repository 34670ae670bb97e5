// jinja2's lexer rules (see lexer.h), written as a hand scanner.
#include "jinja/lexer.h"

#include <cstdlib>

#include "jinja/text.h"

namespace ragd::engine::jinja {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

// `(\d+_)*\d+` at p; returns the end or npos.
size_t match_digits(std::string_view s, size_t p) {
  if (p >= s.size() || !is_digit(s[p])) return std::string_view::npos;
  while (true) {
    while (p < s.size() && is_digit(s[p])) ++p;
    if (p + 1 < s.size() && s[p] == '_' && is_digit(s[p + 1])) {
      ++p;
      continue;
    }
    return p;
  }
}

// jinja2's float_re at p (not after a '.').
size_t match_float(std::string_view s, size_t p) {
  if (p > 0 && s[p - 1] == '.') return std::string_view::npos;
  size_t q = match_digits(s, p);
  if (q == std::string_view::npos) return q;
  auto exponent = [&](size_t at) -> size_t {
    if (at >= s.size() || (s[at] != 'e' && s[at] != 'E')) return std::string_view::npos;
    ++at;
    if (at < s.size() && (s[at] == '+' || s[at] == '-')) ++at;
    return match_digits(s, at);
  };
  // (\.digits)? exponent
  if (q < s.size() && s[q] == '.') {
    const size_t frac = match_digits(s, q + 1);
    if (frac != std::string_view::npos) {
      const size_t e = exponent(frac);
      return e != std::string_view::npos ? e : frac;
    }
    return std::string_view::npos;
  }
  return exponent(q);
}

// jinja2's integer_re at p.
size_t match_int(std::string_view s, size_t p, int* base) {
  if (p >= s.size() || !is_digit(s[p])) return std::string_view::npos;
  if (s[p] == '0' && p + 1 < s.size()) {
    const char k = static_cast<char>(s[p + 1] | 0x20);
    if (k == 'b' || k == 'o' || k == 'x') {
      *base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
      size_t q = p + 2;
      auto ok = [&](char c) { return *base == 16 ? is_hex(c) : (c >= '0' && c < static_cast<char>('0' + *base)); };
      size_t end = std::string_view::npos;
      while (true) {
        size_t r = q;
        if (r < s.size() && s[r] == '_') ++r;
        if (r < s.size() && ok(s[r])) {
          q = end = r + 1;
        } else {
          break;
        }
      }
      if (end != std::string_view::npos) return end;
    }
  }
  *base = 10;
  const bool zero = s[p] == '0';
  size_t q = p + 1;
  while (true) {
    size_t r = q;
    if (r < s.size() && s[r] == '_') ++r;
    if (r < s.size() && (zero ? s[r] == '0' : is_digit(s[r]))) q = r + 1;
    else break;
  }
  return q;
}

constexpr std::string_view kOps2[] = {"//", "**", "==", "!=", ">=", "<="};
constexpr std::string_view kOps1 = "+-/*%~[](){}=<>.:|,;";

// Python's "unicode-escape" decoding of the literal after "backslashreplace" (what jinja2 does to
// string literals): escapes are decoded, other characters kept.
Result<std::string> decode_string(std::string_view raw) {
  // backslashreplace: non-ASCII characters become \xNN / \uNNNN / \UNNNNNNNN first.
  std::string ascii;
  char buf[16];
  for (char32_t c : utf8_decode(raw)) {
    if (c < 0x80) {
      ascii.push_back(static_cast<char>(c));
    } else {
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      ascii += buf;
    }
  }
  std::string out;
  for (size_t i = 0; i < ascii.size(); ++i) {
    const char c = ascii[i];
    if (c != '\\') {
      out.push_back(c);
      continue;
    }
    if (i + 1 >= ascii.size()) return Status::InvalidArgument("\\ at end of string");
    const char e = ascii[++i];
    auto hex = [&](int digits, const char* what) -> Result<char32_t> {
      char32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        const size_t at = i + 1 + static_cast<size_t>(k);
        if (at >= ascii.size() || !is_hex(ascii[at])) return Status::InvalidArgument(std::string("truncated ") + what + " escape");
        const char h = ascii[at];
        v = v * 16 + static_cast<char32_t>(is_digit(h) ? h - '0' : (h | 0x20) - 'a' + 10);
      }
      i += static_cast<size_t>(digits);
      return v;
    };
    char32_t cp;
    switch (e) {
      case '\n': continue;
      case '\\': out.push_back('\\'); continue;
      case '\'': out.push_back('\''); continue;
      case '"': out.push_back('"'); continue;
      case 'a': out.push_back('\a'); continue;
      case 'b': out.push_back('\b'); continue;
      case 'f': out.push_back('\f'); continue;
      case 'n': out.push_back('\n'); continue;
      case 'r': out.push_back('\r'); continue;
      case 't': out.push_back('\t'); continue;
      case 'v': out.push_back('\v'); continue;
      case 'x': {
        RAGD_ASSIGN_OR_RETURN(cp, hex(2, "\\xXX"));
        break;
      }
      case 'u': {
        RAGD_ASSIGN_OR_RETURN(cp, hex(4, "\\uXXXX"));
        break;
      }
      case 'U': {
        RAGD_ASSIGN_OR_RETURN(cp, hex(8, "\\UXXXXXXXX"));
        if (cp > 0x10FFFF) return Status::InvalidArgument("illegal Unicode character");
        break;
      }
      case 'N':
        return Status::InvalidArgument("unsupported construct: \\N{...} escape in a string literal");
      default:
        if (e >= '0' && e <= '7') {
          cp = static_cast<char32_t>(e - '0');
          for (int k = 0; k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7'; ++k)
            cp = cp * 8 + static_cast<char32_t>(ascii[++i] - '0');
          break;
        }
        out.push_back('\\');
        out.push_back(e);
        continue;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF)
      return Status::InvalidArgument("unsupported construct: a surrogate escape in a string literal");
    append_utf8(out, cp);
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  Result<std::vector<Token>> run() {
    const std::string_view s = src_;
    while (pos_ < s.size()) {
      // The next tag start: {{ {% {#.
      size_t t = pos_;
      char kind = 0;
      while ((t = s.find('{', t)) != std::string_view::npos) {
        if (t + 1 < s.size() && (s[t + 1] == '{' || s[t + 1] == '%' || s[t + 1] == '#')) {
          kind = s[t + 1];
          break;
        }
        ++t;
      }
      if (kind == 0) {
        emit_data(pos_, s.substr(pos_));
        break;
      }
      const char sign = t + 2 < s.size() && (s[t + 2] == '-' || s[t + 2] == '+') ? s[t + 2] : 0;
      size_t raw_end = kind == '%' ? match_raw_begin(t) : std::string_view::npos;
      emit_data(pos_, strip_before(s.substr(pos_, t - pos_), sign, kind != '{'));
      if (raw_end != std::string_view::npos) {
        line_starting_ = s[raw_end - 1] == '\n';
        RAGD_RETURN_IF_ERROR(lex_raw(raw_end));
        continue;
      }
      size_t p = t + 2 + (sign ? 1 : 0);
      if (kind == '#') {
        RAGD_RETURN_IF_ERROR(lex_comment(p));
        continue;
      }
      push(kind == '{' ? Tok::kVarBegin : Tok::kBlockBegin, t);
      pos_ = p;
      RAGD_RETURN_IF_ERROR(lex_tag(kind == '%'));
    }
    push(Tok::kEof, s.size());
    return std::move(tokens_);
  }

 private:
  int line_at(size_t pos) {
    for (; line_pos_ < pos && line_pos_ < src_.size(); ++line_pos_)
      if (src_[line_pos_] == '\n') ++line_;
    return line_;
  }

  Status error(size_t pos, const std::string& msg) {
    return Status::InvalidArgument("line " + std::to_string(line_at(pos)) + ": " + msg);
  }

  Token& push(Tok type, size_t pos) {
    Token t;
    t.type = type;
    t.line = line_at(pos);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  void emit_data(size_t pos, std::string_view text) {
    if (text.empty()) return;
    push(Tok::kData, pos).text = std::string(text);
  }

  // '-' strips all whitespace before the tag; otherwise lstrip_blocks strips spaces between the
  // line start and a block or comment tag.
  std::string_view strip_before(std::string_view text, char sign, bool lstrip_applies) {
    if (sign == '-') return text.substr(0, text::space_suffix_start(text, text.size()));
    if (sign == '+' || !lstrip_applies) return text;
    const size_t nl = text.rfind('\n');
    const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if ((l_pos > 0 || line_starting_) && l_pos < text.size() && text::space_prefix(text, l_pos) == text.size() - l_pos)
      return text.substr(0, l_pos);
    return text;
  }

  bool at(size_t p, std::string_view lit) const { return p <= src_.size() && src_.compare(p, lit.size(), lit) == 0; }

  // Whitespace after `-%}` / `-}}` / `-#}`.
  size_t skip_space(size_t p) const { return p + text::space_prefix(src_, p); }

  // {%(-|+|)\s*raw\s*(-%}\s*|%}) at t; the end of the match or npos.
  size_t match_raw_begin(size_t t) const {
    size_t p = t + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_space(p);
    if (!at(p, "raw")) return std::string_view::npos;
    p = skip_space(p + 3);
    if (at(p, "-%}")) return skip_space(p + 3);
    if (at(p, "%}")) return p + 2;
    return std::string_view::npos;
  }

  // Block end at p: +%} (no trim), -%} plus whitespace, %} plus one newline (trim_blocks).
  size_t match_block_end(size_t p, std::string_view close) const {
    if (at(p, "+") && at(p + 1, close)) return p + 1 + close.size();
    if (at(p, "-") && at(p + 1, close)) return skip_space(p + 1 + close.size());
    if (at(p, close)) {
      size_t e = p + close.size();
      if (e < src_.size() && src_[e] == '\n') ++e;
      return e;
    }
    return std::string_view::npos;
  }

  Status lex_raw(size_t body_start) {
    for (size_t q = src_.find("{%", body_start); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t p = q + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_space(p);
      if (!at(p, "endraw")) continue;
      const size_t end = match_block_end(skip_space(p + 6), "%}");
      if (end == std::string::npos) continue;
      emit_data(body_start, strip_before(std::string_view(src_).substr(body_start, q - body_start), sign, true));
      pos_ = end;
      line_starting_ = src_[end - 1] == '\n';
      return Status::OK();
    }
    return error(body_start, "Missing end of raw directive");
  }

  Status lex_comment(size_t p) {
    for (size_t q = p; q < src_.size(); ++q) {
      size_t end = std::string::npos;
      if ((src_[q] == '+' || src_[q] == '-') && at(q + 1, "#}")) {
        end = src_[q] == '+' ? q + 3 : skip_space(q + 3);
      } else if (at(q, "#}")) {
        end = q + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      }
      if (end != std::string::npos) {
        pos_ = end;
        line_starting_ = src_[end - 1] == '\n';
        return Status::OK();
      }
    }
    return error(p, "Missing end of comment tag");
  }

  Status lex_tag(bool block) {
    const std::string_view s = src_;
    std::vector<char> balance;
    while (true) {
      if (pos_ >= s.size()) return error(pos_, std::string("unexpected end of template, expected '") + (block ? "%}" : "}}") + "'");
      if (balance.empty()) {
        const size_t end = block ? match_block_end(pos_, "%}")
                                 : (at(pos_, "-}}") ? skip_space(pos_ + 3)
                                    : at(pos_, "}}") ? pos_ + 2
                                                                    : std::string_view::npos);
        if (end != std::string_view::npos) {
          push(block ? Tok::kBlockEnd : Tok::kVarEnd, pos_);
          pos_ = end;
          line_starting_ = s[end - 1] == '\n';
          return Status::OK();
        }
      }
      const char c = s[pos_];
      if (const size_t ws = text::space_prefix(s, pos_); ws > 0) {
        pos_ += ws;
        continue;
      }
      if (const size_t e = match_float(s, pos_); e != std::string_view::npos) {
        std::string digits;
        for (size_t k = pos_; k < e; ++k)
          if (s[k] != '_') digits.push_back(s[k]);
        push(Tok::kFloat, pos_).f = std::strtod(digits.c_str(), nullptr);
        pos_ = e;
        continue;
      }
      int base = 10;
      if (const size_t e = match_int(s, pos_, &base); e != std::string_view::npos) {
        std::string digits;
        for (size_t k = pos_ + (base == 10 ? 0 : 2); k < e; ++k)
          if (s[k] != '_') digits.push_back(s[k]);
        errno = 0;
        const long long v = std::strtoll(digits.c_str(), nullptr, base);
        if (errno == ERANGE) return error(pos_, "integer literal too large (ragd's integers are 64-bit)");
        push(Tok::kInt, pos_).i = v;
        pos_ = e;
        continue;
      }
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s.size() && is_name_char(s[e])) ++e;
        push(Tok::kName, pos_).text = std::string(s.substr(pos_, e - pos_));
        pos_ = e;
        continue;
      }
      if (c == '\'' || c == '"') {
        size_t e = pos_ + 1;
        while (e < s.size() && s[e] != c) e += s[e] == '\\' ? 2 : 1;
        if (e >= s.size()) return error(pos_, "unterminated string literal");
        auto decoded = decode_string(s.substr(pos_ + 1, e - pos_ - 1));
        if (!decoded.ok()) return error(pos_, decoded.status().message());
        push(Tok::kString, pos_).text = std::move(*decoded);
        pos_ = e + 1;
        continue;
      }
      std::string_view op;
      for (std::string_view o : kOps2)
        if (at(pos_, o)) op = o;
      if (op.empty() && kOps1.find(c) != std::string_view::npos) op = s.substr(pos_, 1);
      if (op.empty()) {
        char32_t cp = utf8_decode(s.substr(pos_, 4)).front();
        std::string shown;
        append_utf8(shown, cp);
        return error(pos_, "unexpected char '" + shown + "'");
      }
      if (op == "(" || op == "[" || op == "{") {
        balance.push_back(op == "(" ? ')' : op == "[" ? ']' : '}');
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty()) return error(pos_, "unexpected '" + std::string(op) + "'");
        if (balance.back() != op[0])
          return error(pos_, "unexpected '" + std::string(op) + "', expected '" + std::string(1, balance.back()) + "'");
        balance.pop_back();
      }
      push(Tok::kOp, pos_).text = std::string(op);
      pos_ += op.size();
    }
  }

  std::string src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
  size_t line_pos_ = 0;
  int line_ = 1;
};

}  // namespace

Result<std::vector<Token>> lex(std::string_view source) {
  // Newlines to \n; one trailing newline dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src.push_back(source[i]);
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).run();
}

}  // namespace ragd::engine::jinja
