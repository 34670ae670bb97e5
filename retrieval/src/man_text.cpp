#include "man_text.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ragd/retrieval/text_util.h"

namespace ragd::retrieval {

namespace {

// Special characters (\(xx, \[name], \C'name') as the rendered page shows them; plain ASCII where
// the glyph is only typography, so the terms match what a user types.
struct Glyph {
  const char* name;
  const char* text;
};
constexpr Glyph kGlyphs[] = {
    {"em", "-"},   {"en", "-"},   {"hy", "-"},   {"mi", "-"},   {"bu", "*"},   {"lq", "\""},  {"rq", "\""},
    {"dq", "\""},  {"oq", "'"},   {"cq", "'"},   {"aq", "'"},   {"ga", "`"},   {"ha", "^"},   {"ti", "~"},
    {"rs", "\\"},  {"sl", "/"},   {"ba", "|"},   {"bv", "|"},   {"br", "|"},   {"or", "|"},   {"ul", "_"},
    {"ru", "_"},   {"pl", "+"},   {"eq", "="},   {"mu", "x"},   {"di", "/"},   {"->", "->"},  {"<-", "<-"},
    {">=", ">="},  {"<=", "<="},  {"!=", "!="},  {"==", "=="},  {"co", "(c)"}, {"rg", "(R)"}, {"tm", "(TM)"},
    {"de", "\xC2\xB0"}, {"sc", "\xC2\xA7"}, {"ps", "\xC2\xB6"}, {"Fo", "\""}, {"Fc", "\""}, {"fo", "'"},
    {"fc", "'"},   {"at", "@"},   {"sh", "#"},   {"Do", "$"},   {"lB", "["},   {"rB", "]"},   {"lC", "{"},
    {"rC", "}"},   {"la", "<"},   {"ra", ">"},   {"pc", "."},   {"en", "-"},   {"+-", "+-"},  {"12", "1/2"},
};
// Predefined strings (\*(xx, \*[name]) of man(7) and mdoc(7).
constexpr Glyph kStrings[] = {
    {"lq", "\""}, {"rq", "\""}, {"R", "(R)"}, {"Tm", "(TM)"}, {"Aq", "'"}, {"aq", "'"}, {"Lq", "\""},
    {"Rq", "\""}, {"Ba", "|"},  {"Le", "<="}, {"Ge", ">="},   {"Pi", "pi"},
};

std::string_view lookup(const Glyph* table, size_t n, std::string_view name) {
  for (size_t i = 0; i < n; ++i)
    if (name == table[i].name) return table[i].text;
  return {};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    if (cp >= 0xD800 && cp < 0xE000) return;
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A special character's text by its name: the table, groff's "uXXXX" code points, else nothing.
std::string glyph(std::string_view name) {
  if (std::string_view t = lookup(kGlyphs, std::size(kGlyphs), name); !t.empty()) return std::string(t);
  if (name.size() >= 5 && name[0] == 'u') {
    uint32_t cp = 0;
    bool ok = name.size() <= 7;
    for (size_t i = 1; ok && i < name.size(); ++i) {
      const char c = name[i];
      ok = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
      if (ok) cp = cp * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    if (ok) {
      std::string s;
      append_utf8(s, cp);
      return s;
    }
  }
  return {};
}

// The name after an escape that takes one: "(xx", "[name]" or a single character. Advances i.
std::string_view escape_name(std::string_view s, size_t& i) {
  if (i >= s.size()) return {};
  if (s[i] == '(') {
    std::string_view n = s.substr(i + 1, 2);
    i = std::min(s.size(), i + 3);
    return n;
  }
  if (s[i] == '[') {
    size_t e = s.find(']', i + 1);
    if (e == std::string_view::npos) e = s.size();
    std::string_view n = s.substr(i + 1, e - i - 1);
    i = std::min(s.size(), e + 1);
    return n;
  }
  return s.substr(i++, 1);
}

// Skips a delimited argument ('...' or any delimiter character) at i.
std::string_view delimited(std::string_view s, size_t& i) {
  if (i >= s.size()) return {};
  const char d = s[i];
  size_t e = s.find(d, i + 1);
  if (e == std::string_view::npos) e = s.size();
  std::string_view arg = s.substr(i + 1, e - i - 1);
  i = std::min(s.size(), e + 1);
  return arg;
}

// Escapes that take a fixed number of bytes can cut a character of a line in UTF-8 in two: what
// is left of it goes, so every text this renders is valid UTF-8.
void drop_invalid_utf8(std::string& s) {
  size_t from = 0;
  while (true) {
    const size_t bad = find_invalid_utf8(std::string_view(s).substr(from));
    if (bad == std::string_view::npos) return;
    s.erase(from + bad, 1);
    from += bad;
  }
}

std::string unescape_raw(std::string_view s, bool* join);

// One line of roff text with its escapes resolved. *join: the line ended in \c (no space before
// the next line's text).
std::string unescape(std::string_view s, bool* join = nullptr) {
  std::string out = unescape_raw(s, join);
  drop_invalid_utf8(out);
  return out;
}

std::string unescape_raw(std::string_view s, bool* join) {
  std::string out;
  if (join) *join = false;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i++];
    if (c != '\\') {
      out += c;
      continue;
    }
    if (i >= s.size()) {  // a trailing backslash continues the line
      if (join) *join = true;
      break;
    }
    const char e = s[i++];
    switch (e) {
      case '"':
      case '#':
        return out;  // comment to the end of the line
      case 'f':
      case 'F':
      case 'n':
      case 'g':
      case 'm':
      case 'M':
      case 'Y':
      case 'V':
      case 'k':
      case '$':
        escape_name(s, i);
        break;
      case 's':
        if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
        if (i < s.size() && (s[i] == '(' || s[i] == '[')) {
          escape_name(s, i);
        } else if (i < s.size() && s[i] == '\'') {
          delimited(s, i);
        } else {
          for (int d = 0; d < 2 && i < s.size() && s[i] >= '0' && s[i] <= '9'; ++d) ++i;
        }
        break;
      case '(':
      case '[': {
        --i;
        out += glyph(escape_name(s, i));
        break;
      }
      case 'C':
        out += glyph(delimited(s, i));
        break;
      case '*': {
        std::string_view n = escape_name(s, i);
        out += lookup(kStrings, std::size(kStrings), n);
        break;
      }
      case 'e':
      case 'E':
      case '\\':
        out += '\\';
        break;
      case '-':
        out += '-';
        break;
      case ' ':
      case '~':
      case '0':
      case 't':
        out += ' ';
        break;
      case 'c':
        if (join) *join = true;
        return out;
      case 'h':
      case 'v':
      case 'w':
      case 'l':
      case 'L':
      case 'D':
      case 'o':
      case 'X':
      case 'Z':
      case 'N':
      case 'b':
      case 'x':
      case 'R':
      case 'S':
      case 'H':
      case 'A':
      case 'B':
        delimited(s, i);
        break;
      case '&':
      case '|':
      case '^':
      case '%':
      case ':':
      case ',':
      case '/':
      case ')':
      case '{':
      case '}':
      case 'z':
      case 'u':
      case 'd':
      case 'r':
      case 'p':
      case 'a':
        break;
      default:
        out += e;  // \. \' \` and the like: the character itself
    }
  }
  return out;
}

// A request line's arguments: words split at spaces, "double quoted" ones kept whole ("" inside
// quotes is a quote); escapes not yet resolved.
std::vector<std::string_view> split_args(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i >= s.size()) break;
    if (s.substr(i, 2) == "\\\"") break;  // comment
    if (s[i] == '"') {
      size_t b = ++i;
      while (i < s.size() && !(s[i] == '"' && (i + 1 >= s.size() || s[i + 1] != '"'))) i += s[i] == '"' ? 2 : 1;
      out.push_back(s.substr(b, std::min(i, s.size()) - b));
      if (i < s.size()) ++i;
    } else {
      size_t b = i;
      while (i < s.size() && s[i] != ' ' && s[i] != '\t') {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        ++i;
      }
      out.push_back(s.substr(b, i - b));
    }
  }
  return out;
}

std::string unescape_arg(std::string_view a) {
  std::string s;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == '"' && i + 1 < a.size() && a[i + 1] == '"') ++i;  // "" in a quoted argument
    s += a[i];
  }
  return unescape(s);
}

// mdoc macros that may appear among another macro's arguments ("callable"): they are dropped from
// the text, a few with an effect (Fl prefixes '-', Xr writes name(section), Ns joins, the
// enclosures open and close).
constexpr const char* kMdocCallable[] = {
    "Ac", "Ad", "An", "Ao", "Ap", "Aq", "Ar", "At", "Bc", "Bo", "Bq", "Brc", "Bro", "Brq", "Bsx", "Bx", "Cd", "Cm",
    "Dc", "Do", "Dq", "Dv", "Dx", "Ec", "Em", "En", "Eo", "Er", "Es", "Ev", "Fa", "Fc", "Fl", "Fn", "Fo", "Ft",
    "Fx", "Ic", "In", "Li", "Lk", "Ms", "Mt", "Nm", "No", "Ns", "Nx", "Oc", "Oo", "Op", "Ox", "Pa", "Pc", "Pf",
    "Po", "Pq", "Qc", "Ql", "Qo", "Qq", "Sc", "So", "Sq", "St", "Sx", "Sy", "Ta", "Tn", "Ux", "Va", "Vt", "Xc",
    "Xo", "Xr"};

bool mdoc_callable(std::string_view w) {
  return std::any_of(std::begin(kMdocCallable), std::end(kMdocCallable), [&](const char* m) { return w == m; });
}

class Renderer {
 public:
  ManText run(std::string_view roff);

 private:
  void request(std::string_view name, std::string_view rest);
  void text_line(std::string_view line);
  void emit(std::string_view s);  // inline text into the open paragraph
  void paragraph();
  void newline();
  void heading(std::string_view h, bool sub);
  std::string mdoc_line(std::string_view macro, const std::vector<std::string_view>& args);
  void set_name_section();

  ManText m_;
  std::string& out_ = m_.text;
  bool nofill_ = false;
  bool join_ = false;        // the previous text line ended in \c
  bool tag_line_ = false;    // .TP: the next text line is a tag, on its own line
  int heading_next_ = 0;     // .SH / .SS without arguments: the next text line is the heading (1 / 2)
  bool skip_block_ = false;  // inside .de / .ig (until "..")
  int table_ = 0;            // 0 none, 1 options and format lines, 2 data
  char table_tab_ = '\t';    // the table's column separator (tbl's tab(x) option)
  bool in_name_ = false;     // inside the NAME section
  std::string name_text_;    // its text
  std::string sh_;           // the current .SH heading
  std::string url_;          // .UR / .MT target
  std::string mdoc_name_;    // the first .Nm
};

void Renderer::emit(std::string_view s) {
  if (s.empty()) return;
  if (!out_.empty() && out_.back() != '\n' && out_.back() != ' ' && !join_ && s.front() != ' ') out_ += ' ';
  out_ += s;
  if (in_name_) {
    if (!name_text_.empty()) name_text_ += ' ';
    name_text_ += s;
  }
  join_ = false;
}

void Renderer::newline() {
  while (!out_.empty() && out_.back() == ' ') out_.pop_back();
  if (!out_.empty() && out_.back() != '\n') out_ += '\n';
}

void Renderer::paragraph() {
  while (!out_.empty() && (out_.back() == ' ' || out_.back() == '\n')) out_.pop_back();
  if (!out_.empty()) out_ += "\n\n";
  join_ = false;
}

void Renderer::heading(std::string_view h, bool sub) {
  std::string text = std::string(trim_space(h));
  if (text.empty()) return;
  paragraph();
  if (!m_.sections.empty()) m_.sections.back().byte_end = out_.size();
  Section s;
  if (sub && !sh_.empty()) s.path.push_back(sh_);
  if (!sub) sh_ = text;
  s.path.push_back(text);
  s.byte_begin = out_.size();
  in_name_ = !sub && (text == "NAME" || text == "Name" || text == "NOM" || text == "BEZEICHNUNG");
  out_ += text;
  m_.sections.push_back(std::move(s));
  paragraph();
}

void Renderer::set_name_section() {
  // "grep, egrep, fgrep \- print lines that match patterns" (the \- rendered as '-').
  std::string_view t = trim_space(name_text_);
  size_t dash = t.find(" - ");
  size_t skip = 3;
  if (dash == std::string_view::npos) {
    dash = t.find(" -- ");
    skip = 4;
  }
  if (dash != std::string_view::npos && m_.description.empty()) m_.description = std::string(trim_space(t.substr(dash + skip)));
}

std::string Renderer::mdoc_line(std::string_view macro, const std::vector<std::string_view>& args) {
  std::string out;
  bool no_space = false;
  std::vector<char> closers;  // enclosures opened on this line
  auto put = [&](std::string_view w) {
    if (w.empty()) return;
    const bool punct = w.size() == 1 && std::strchr(".,:;)]?!", w[0]) != nullptr;
    if (!out.empty() && !no_space && !punct && out.back() != '(' && out.back() != '[' && out.back() != '"') out += ' ';
    out += w;
    no_space = false;
  };
  auto open = [&](const char* o, char c) {
    if (!out.empty() && !no_space) out += ' ';
    out += o;
    no_space = true;
    closers.push_back(c);
  };
  auto close = [&]() {
    if (closers.empty()) return;
    out += closers.back();
    closers.pop_back();
  };
  std::vector<std::string_view> words;
  words.push_back(macro);
  words.insert(words.end(), args.begin(), args.end());
  for (size_t i = 0; i < words.size(); ++i) {
    std::string_view w = words[i];
    if (!(i == 0 || mdoc_callable(w))) {
      put(unescape_arg(w));
      continue;
    }
    if (w == "Fl") {
      std::string f = "-";
      if (i + 1 < words.size() && !mdoc_callable(words[i + 1])) f += unescape_arg(words[++i]);
      put(f);
    } else if (w == "Xr" && i + 2 < words.size()) {
      put(unescape_arg(words[i + 1]) + "(" + unescape_arg(words[i + 2]) + ")");
      i += 2;
    } else if (w == "Nm") {
      if (i + 1 < words.size() && !mdoc_callable(words[i + 1])) {
        std::string n = unescape_arg(words[++i]);
        if (mdoc_name_.empty()) mdoc_name_ = n;
        put(n);
      } else {
        put(mdoc_name_);
      }
    } else if (w == "Ns" || w == "Pf") {
      no_space = true;
      if (w == "Pf" && i + 1 < words.size()) {
        out += (out.empty() ? "" : " ") + unescape_arg(words[++i]);
        no_space = true;
      }
    } else if (w == "Op" || w == "Oo" || w == "Bq" || w == "Bo") {
      open("[", ']');
    } else if (w == "Pq" || w == "Po") {
      open("(", ')');
    } else if (w == "Dq" || w == "Do" || w == "Qq" || w == "Qo" || w == "Ql") {
      open("\"", '"');
    } else if (w == "Sq" || w == "So" || w == "Aq" || w == "Ao") {
      open(w[0] == 'A' ? "<" : "'", w[0] == 'A' ? '>' : '\'');
    } else if (w == "Brq" || w == "Bro") {
      open("{", '}');
    } else if (w == "Oc" || w == "Pc" || w == "Dc" || w == "Qc" || w == "Sc" || w == "Ac" || w == "Bc" ||
               w == "Brc") {
      close();
    } else if (w == "Ap") {
      out += '\'';
      no_space = true;
    }
    // every other macro name is dropped; its arguments follow as words
  }
  while (!closers.empty()) close();
  return out;
}

void Renderer::request(std::string_view name, std::string_view rest) {
  const std::vector<std::string_view> args = split_args(rest);
  auto joined = [&](bool spaced) {
    std::string s;
    for (size_t i = 0; i < args.size(); ++i) {
      if (spaced && i > 0) s += ' ';
      s += unescape_arg(args[i]);
    }
    return s;
  };
  if (name == "de" || name == "de1" || name == "am" || name == "ig" || name == "ami") {
    skip_block_ = true;
    return;
  }
  if (name == "TH" || name == "Dt") {
    if (!args.empty()) m_.name = unescape_arg(args[0]);
    if (args.size() > 1) m_.section = unescape_arg(args[1]);
    return;
  }
  if (name == "SH" || name == "SS" || name == "Sh" || name == "Ss") {
    const bool sub = name == "SS" || name == "Ss";
    if (in_name_) set_name_section();
    if (args.empty()) heading_next_ = sub ? 2 : 1;
    else heading(joined(true), sub);
    return;
  }
  if (name == "so") {
    if (!args.empty()) m_.link = unescape_arg(args[0]);
    return;
  }
  if (name == "B" || name == "I" || name == "SM" || name == "SB" || name == "R") {
    if (!args.empty()) text_line(joined(true));
    return;
  }
  if (name == "BR" || name == "BI" || name == "IB" || name == "IR" || name == "RB" || name == "RI") {
    text_line(joined(false));
    return;
  }
  if (name == "PP" || name == "LP" || name == "P" || name == "sp" || name == "Pp" || name == "Lp" || name == "HP" ||
      name == "Bl" || name == "El" || name == "Rs" || name == "Re") {
    paragraph();
    return;
  }
  if (name == "br") {
    newline();
    return;
  }
  if (name == "TP" || name == "TQ") {
    paragraph();
    tag_line_ = true;
    return;
  }
  if (name == "IP") {
    paragraph();
    if (!args.empty()) {
      emit(unescape_arg(args[0]));
      newline();
    }
    return;
  }
  if (name == "nf" || name == "EX") {
    paragraph();
    nofill_ = true;
    return;
  }
  if (name == "fi" || name == "EE") {
    nofill_ = false;
    paragraph();
    return;
  }
  if (name == "Bd") {
    paragraph();
    nofill_ = std::any_of(args.begin(), args.end(), [](std::string_view a) { return a == "-literal" || a == "-unfilled"; });
    return;
  }
  if (name == "Ed") {
    nofill_ = false;
    paragraph();
    return;
  }
  if (name == "TS") {
    paragraph();
    table_ = 1;
    table_tab_ = '\t';
    return;
  }
  if (name == "UR" || name == "MT") {
    url_ = args.empty() ? "" : unescape_arg(args[0]);
    return;
  }
  if (name == "UE" || name == "ME") {
    if (!url_.empty()) emit("<" + url_ + ">");
    url_.clear();
    if (!args.empty()) {
      join_ = true;
      emit(unescape_arg(args[0]));
    }
    return;
  }
  if (name == "Nd") {
    m_.description = joined(true);
    emit("- " + m_.description);
    return;
  }
  if (name == "It" || name == "D1" || name == "Dl") {
    paragraph();
    if (!args.empty()) {
      emit(mdoc_line("No", args));
      if (name == "It") newline();
    }
    return;
  }
  if (name.size() >= 2 && name.size() <= 3 && std::isupper(static_cast<unsigned char>(name[0])) &&
      std::islower(static_cast<unsigned char>(name[1])) && mdoc_callable(name)) {
    text_line(mdoc_line(name, args));
    return;
  }
  // Everything else (.RS, .RE, .in, .ft, .ds, .nr, .if, .ie, .el, .ad, .na, .ne, .Dd, .Os, .PD,
  // ...) only formats, defines or branches: nothing of it is text.
}

void Renderer::text_line(std::string_view line) {
  if (heading_next_ != 0) {
    heading(line, heading_next_ == 2);
    heading_next_ = 0;
    return;
  }
  if (nofill_) {
    std::string_view l = line;
    while (!l.empty() && l.back() == ' ') l.remove_suffix(1);
    out_ += l;
    out_ += '\n';
    if (in_name_) name_text_ += std::string(l) + " ";
    return;
  }
  std::string_view t = trim_space(line);
  if (t.empty()) {
    paragraph();
    return;
  }
  emit(t);
  if (tag_line_) {
    newline();
    tag_line_ = false;
  }
}

ManText Renderer::run(std::string_view roff) {
  size_t pos = 0;
  while (pos < roff.size()) {
    size_t eol = roff.find('\n', pos);
    if (eol == std::string_view::npos) eol = roff.size();
    std::string_view line = roff.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (skip_block_) {
      // The end of a definition: ".." (".  ." inside an indented block is the same request).
      std::string_view t = trim_space(line);
      if (!t.empty() && (t[0] == '.' || t[0] == '\'')) {
        t.remove_prefix(1);
        if (trim_space(t).rfind('.', 0) == 0) skip_block_ = false;
      }
      continue;
    }
    if (table_ != 0) {
      std::string_view t = trim_space(line);
      if (t == ".TE") {
        table_ = 0;
        paragraph();
      } else if (table_ == 1) {
        if (size_t p = t.find("tab("); p != std::string_view::npos && p + 4 < t.size()) table_tab_ = t[p + 4];
        if (!t.empty() && t.back() == '.') table_ = 2;  // the last format line ends with '.'
      } else if (!t.empty() && t.front() != '.') {
        std::string row;
        for (char c : line) row += c == '\t' || c == table_tab_ ? ' ' : c;
        std::string s = unescape(row);
        std::string_view v = trim_space(s);
        if (v.rfind("T{", 0) == 0) v.remove_prefix(2);
        if (v.size() >= 2 && v.substr(v.size() - 2) == "T}") v.remove_suffix(2);
        if (v != "_" && v != "=" && !trim_space(v).empty()) {
          emit(trim_space(v));
          newline();
        }
      }
      continue;
    }
    if (!line.empty() && (line[0] == '.' || line[0] == '\'')) {
      std::string_view r = line.substr(1);
      while (!r.empty() && (r.front() == ' ' || r.front() == '\t')) r.remove_prefix(1);
      if (r.empty() || r.rfind("\\\"", 0) == 0 || r.rfind("\\#", 0) == 0) continue;  // comment
      size_t e = 0;
      while (e < r.size() && r[e] != ' ' && r[e] != '\t') ++e;
      request(r.substr(0, e), r.substr(e));
      continue;
    }
    bool join = false;
    std::string t = unescape(line, &join);
    if (line.rfind("\\\"", 0) == 0 && trim_space(t).empty()) continue;  // a comment line
    text_line(t);
    join_ = join;
  }
  if (in_name_) set_name_section();
  if (!m_.sections.empty()) m_.sections.back().byte_end = out_.size();
  while (!out_.empty() && (out_.back() == '\n' || out_.back() == ' ')) out_.pop_back();
  for (Section& s : m_.sections) s.byte_end = std::min<uint64_t>(s.byte_end, out_.size());
  if (m_.name.empty()) m_.name = mdoc_name_;
  return std::move(m_);
}

}  // namespace

std::string ManText::title() const {
  // The page's names as NAME writes them ("grep, egrep") are in lower case where .TH shouts.
  std::string n = name;
  bool upper = std::none_of(n.begin(), n.end(), [](unsigned char c) { return std::islower(c); });
  if (upper) std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string t = n;
  if (!section.empty()) t += "(" + section + ")";
  if (!description.empty()) t += (t.empty() ? "" : " \u2014 ") + description;
  if (t.size() > 200) t.resize(utf8_floor(t, 200));
  return t;
}

bool looks_like_man(std::string_view head, bool man_extension) {
  size_t pos = 0;
  while (pos < head.size()) {
    size_t eol = head.find('\n', pos);
    if (eol == std::string_view::npos) eol = head.size();
    std::string_view line = trim_space(head.substr(pos, eol - pos));
    pos = eol + 1;
    if (line.empty() || line == ".") continue;
    if (line.rfind(".\\\"", 0) == 0 || line.rfind("'\\\"", 0) == 0 || line.rfind("\\\"", 0) == 0 ||
        line.rfind(".\\#", 0) == 0)
      continue;  // comments
    if (line.rfind(".TH ", 0) == 0 || line.rfind(".Dd", 0) == 0 || line.rfind(".Dt ", 0) == 0) return true;
    if (line.rfind(".so ", 0) == 0) return man_extension || line.find('/') != std::string_view::npos;
    // Generated pages (pod2man, help2man) define macros and strings before their .TH, further
    // than the head may reach: their name decides.
    for (const char* r : {".de ", ".ds ", ".nr ", ".if ", ".ie ", ".ig", ".lf ", ".IX "})
      if (line.rfind(r, 0) == 0) return man_extension || head.find("\n.TH ") != std::string_view::npos;
    return false;
  }
  return false;
}

ManText man_to_text(std::string_view roff) { return Renderer().run(roff); }

}  // namespace ragd::retrieval
