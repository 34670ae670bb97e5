// Python methods of str / dict / list that templates call (message.content.strip(),
// message.get('x'), ...), and the template globals (range, dict, namespace, HF's raise_exception
// and strftime_now). Methods that would mutate a value are refused as jinja2's
// ImmutableSandboxedEnvironment refuses them: an Undefined that raises when used.
#include <time.h>

#include <algorithm>
#include <chrono>

#include "jinja/object.h"
#include "jinja/text.h"

namespace ragd::engine::jinja {

namespace {

using Method = Value (*)(const Value& self, const CallArgs& args);

std::string str_arg(const std::optional<Value>& v, std::string_view what) {
  if (!v || !v->is_string()) {
    if (v && v->is_undefined()) fail_undefined(*v);
    fail(std::string(what) + ": expected a str, got " + (v ? type_name(*v) : "nothing"));
  }
  return v->as_string();
}

std::optional<std::string> opt_str(const std::optional<Value>& v, std::string_view what) {
  if (!v || v->is_none()) return std::nullopt;
  return str_arg(v, what);
}

int64_t int_arg(const std::optional<Value>& v, int64_t dflt, std::string_view what) {
  if (!v) return dflt;
  if (!v->is_int() && !v->is_bool()) {
    if (v->is_undefined()) fail_undefined(*v);
    fail(std::string(what) + ": '" + type_name(*v) + "' object cannot be interpreted as an integer");
  }
  return v->as_int();
}

Value str_list(std::vector<std::string> parts, SeqKind kind = SeqKind::kList) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::list(std::move(out), kind);
}

// startswith / endswith: a str or a tuple of str.
bool affix(const Value& self, const CallArgs& args, bool prefix) {
  const char* what = prefix ? "startswith" : "endswith";
  auto a = args.bind(what, {"affix"});
  if (!a[0]) fail(std::string(what) + "() takes at least 1 argument (0 given)");
  if (args.pos.size() > 1) fail(std::string(what) + "(): start / end arguments are not supported");
  std::vector<std::string> cands;
  if (a[0]->is_list() && a[0]->seq_kind() == SeqKind::kTuple) {
    for (const Value& v : a[0]->items()) cands.push_back(str_arg(v, what));
  } else if (a[0]->is_string()) {
    cands.push_back(a[0]->as_string());
  } else {
    fail(std::string(what) + " first arg must be str or a tuple of str, not " + type_name(*a[0]));
  }
  const std::string& s = self.as_string();
  for (const auto& c : cands)
    if (prefix ? s.starts_with(c) : s.ends_with(c)) return true;
  return false;
}

Value pad(const Value& self, const CallArgs& args, const char* what, int where /* -1 left, 0 center, 1 right */) {
  auto a = args.bind(what, {"width", "fillchar"});
  const int64_t width = int_arg(a[0], 0, what);
  const std::string fill = a[1] ? str_arg(a[1], what) : " ";
  if (utf8_length(fill) != 1) fail(std::string(what) + "() argument 2 must be a single character");
  const std::string& s = self.as_string();
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return s;
  const int64_t total = width - len;
  int64_t left = 0;
  if (where == 1) left = total;  // rjust
  else if (where == 0) left = total / 2 + (total & width & 1);  // CPython's center
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

Value str_method(const std::string& name, const Value& self, const CallArgs& args) {
  const std::string& s = self.as_string();
  auto noargs = [&] {
    if (!args.pos.empty() || !args.kw.empty()) fail("str." + name + "() takes no arguments");
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    auto a = args.bind(name, {"chars"});
    return text::strip(s, opt_str(a[0], name), name != "rstrip", name != "lstrip");
  }
  if (name == "split" || name == "rsplit") {
    auto a = args.bind(name, {"sep", "maxsplit"});
    const auto sep = opt_str(a[0], name);
    if (sep && sep->empty()) fail("empty separator");
    const int64_t maxsplit = int_arg(a[1], -1, name);
    return str_list(name == "split" ? text::split(s, sep, maxsplit) : text::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    auto a = args.bind(name, {"keepends"});
    return str_list(text::splitlines(s, a[0] && a[0]->truthy()));
  }
  if (name == "startswith") return affix(self, args, true);
  if (name == "endswith") return affix(self, args, false);
  if (name == "upper") return noargs(), text::upper(s);
  if (name == "lower" || name == "casefold") return noargs(), text::lower(s);
  if (name == "title") return noargs(), text::title(s);
  if (name == "capitalize") return noargs(), text::capitalize(s);
  if (name == "swapcase") return noargs(), text::swapcase(s);
  if (name == "replace") {
    auto a = args.bind(name, {"old", "new", "count"});
    return text::replace(s, str_arg(a[0], name), str_arg(a[1], name), int_arg(a[2], -1, name));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    if (args.pos.size() != 1 || !args.kw.empty()) fail("str." + name + "(): only the substring argument is supported");
    const int64_t i = text::find(s, str_arg(args.pos[0], name), name[0] == 'r');
    if (i < 0 && (name == "index" || name == "rindex")) fail("substring not found");
    return i;
  }
  if (name == "count") {
    if (args.pos.size() != 1 || !args.kw.empty()) fail("str.count(): only the substring argument is supported");
    return text::count(s, str_arg(args.pos[0], name));
  }
  if (name == "join") {
    if (args.pos.size() != 1) fail("str.join() takes exactly one argument");
    std::string out;
    size_t i = 0;
    for (const Value& v : iterate(args.pos[0])) {
      if (!v.is_string())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + type_name(v) + " found");
      if (i++ > 0) out += s;
      out += v.as_string();
    }
    return out;
  }
  if (name == "removeprefix" || name == "removesuffix") {
    auto a = args.bind(name, {"affix"});
    const std::string x = str_arg(a[0], name);
    if (name == "removeprefix") return s.starts_with(x) ? s.substr(x.size()) : s;
    return s.ends_with(x) && !x.empty() ? s.substr(0, s.size() - x.size()) : s;
  }
  if (name == "partition" || name == "rpartition") {
    auto a = args.bind(name, {"sep"});
    const std::string sep = str_arg(a[0], name);
    if (sep.empty()) fail("empty separator");
    const size_t j = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (j == std::string::npos)
      return name == "partition" ? str_list({s, "", ""}, SeqKind::kTuple) : str_list({"", "", s}, SeqKind::kTuple);
    return str_list({s.substr(0, j), sep, s.substr(j + sep.size())}, SeqKind::kTuple);
  }
  if (name == "center") return pad(self, args, "center", 0);
  if (name == "ljust") return pad(self, args, "ljust", -1);
  if (name == "rjust") return pad(self, args, "rjust", 1);
  if (name == "zfill") {
    auto a = args.bind(name, {"width"});
    const int64_t width = int_arg(a[0], 0, name);
    const auto len = static_cast<int64_t>(utf8_length(s));
    if (width <= len) return s;
    std::string sign, body = s;
    if (!s.empty() && (s[0] == '+' || s[0] == '-')) sign = s.substr(0, 1), body = s.substr(1);
    return sign + std::string(static_cast<size_t>(width - len), '0') + body;
  }
  if (name == "isascii") {
    noargs();
    return std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  }
  if (name == "isprintable") {
    noargs();
    for (char32_t c : utf8_decode(s))
      if (!text::is_printable(c)) return false;
    return true;
  }
  bool known = false;
  const bool r = text::predicate(name, s, &known);
  if (known) return noargs(), r;
  fail("str." + name + "() is not supported");
}

Value dict_method(const std::string& name, const Value& self, const CallArgs& args) {
  auto noargs = [&] {
    if (!args.pos.empty() || !args.kw.empty()) fail("dict." + name + "() takes no arguments");
  };
  if (name == "items") {
    noargs();
    std::vector<Value> out;
    for (const auto& [k, v] : self.entries()) out.push_back(Value::list({Value(k), v}, SeqKind::kTuple));
    return Value::list(std::move(out), SeqKind::kDictItems);
  }
  if (name == "keys") {
    noargs();
    std::vector<Value> out;
    for (const auto& [k, _] : self.entries()) out.emplace_back(k);
    return Value::list(std::move(out), SeqKind::kDictKeys);
  }
  if (name == "values") {
    noargs();
    std::vector<Value> out;
    for (const auto& [_, v] : self.entries()) out.push_back(v);
    return Value::list(std::move(out), SeqKind::kDictValues);
  }
  if (name == "get") {
    if (!args.kw.empty()) fail("dict.get() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 2) fail("get expected 1 or 2 arguments, got " + std::to_string(args.pos.size()));
    const Value& key = args.pos[0];
    if (key.is_list() && key.seq_kind() != SeqKind::kTuple) fail("unhashable type: 'list'");
    if (key.is_dict()) fail("unhashable type: 'dict'");
    if (key.is_string())
      if (const Value* v = self.get(key.as_string())) return *v;
    return args.pos.size() == 2 ? args.pos[1] : Value();
  }
  if (name == "copy") return noargs(), self;
  fail("dict." + name + "() is not supported");
}

Value list_method(const std::string& name, const Value& self, const CallArgs& args) {
  if (name == "count" || name == "index") {
    if (args.pos.size() != 1 || !args.kw.empty()) fail("list." + name + "() takes exactly one argument");
    int64_t n = 0, i = 0;
    for (const Value& v : self.items()) {
      if (equal(v, args.pos[0])) {
        if (name == "index") return i;
        ++n;
      }
      ++i;
    }
    if (name == "index") fail(args.pos[0].repr() + " is not in list");
    return n;
  }
  if (name == "copy") {
    if (!args.pos.empty() || !args.kw.empty()) fail("list.copy() takes no arguments");
    return Value::list({self.items().begin(), self.items().end()}, self.seq_kind());
  }
  fail("list." + name + "() is not supported (it would modify the list)");
}

constexpr std::string_view kStrMethods[] = {
    "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
    "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
    "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
    "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
    "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"};
constexpr std::string_view kDictMethods[] = {"copy", "fromkeys", "get", "items", "keys", "values"};
constexpr std::string_view kDictMutators[] = {"clear", "pop", "popitem", "setdefault", "update"};
// jinja2's sandbox refuses append / extend / insert / remove / reverse / sort but lets pop and
// clear through; ragd's values are immutable, so those two fail when called.
constexpr std::string_view kListMethods[] = {"clear", "copy", "count", "index", "pop"};
constexpr std::string_view kListMutators[] = {"append", "extend", "insert", "remove", "reverse", "sort"};

bool in(std::span<const std::string_view> set, std::string_view name) {
  return std::find(set.begin(), set.end(), name) != set.end();
}

Value bind(const Value& self, const std::string& name, Value (*m)(const std::string&, const Value&, const CallArgs&)) {
  return Value::object(std::make_shared<Function>(
      type_name(self) + "." + name, [self, name, m](Ctx&, const CallArgs& args) { return m(name, self, args); }));
}

Value unsafe(const Value& self, const std::string& name) {
  return Value::undefined("access to attribute '" + name + "' of '" + type_name(self) + "' object is unsafe.");
}

// Python's datetime.now().strftime(fmt) for a naive datetime: %f is microseconds, %z and %Z are
// empty, everything else is the C library's strftime.
std::string strftime_py(const std::string& fmt, const RenderOptions& o) {
  const auto now = o.now ? *o.now : std::chrono::system_clock::now();
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count();
  const time_t secs = static_cast<time_t>(us >= 0 ? us / 1000000 : (us - 999999) / 1000000);
  const int micros = static_cast<int>(us - static_cast<int64_t>(secs) * 1000000);
  struct tm tm {};
  if (o.now) gmtime_r(&secs, &tm);
  else localtime_r(&secs, &tm);
  std::string c_fmt;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] == '%' && i + 1 < fmt.size()) {
      const char d = fmt[i + 1];
      if (d == 'f') {
        char b[8];
        std::snprintf(b, sizeof b, "%06d", micros);
        c_fmt += b;
        ++i;
        continue;
      }
      if (d == 'z' || d == 'Z') {
        ++i;
        continue;
      }
      c_fmt += fmt.substr(i, 2);
      ++i;
      continue;
    }
    c_fmt.push_back(fmt[i]);
  }
  if (c_fmt.empty()) return {};
  std::string buf(c_fmt.size() * 8 + 256, '\0');
  // A leading marker tells an empty expansion from a too-small buffer.
  const std::string marked = "\x01" + c_fmt;
  const size_t n = std::strftime(buf.data(), buf.size(), marked.c_str(), &tm);
  if (n == 0) fail("strftime_now: format too long");
  return buf.substr(1, n - 1);
}

}  // namespace

Value bound_method(const Value& self, const std::string& name) {
  switch (self.type()) {
    case Value::Type::kString:
      if (in(kStrMethods, name)) return bind(self, name, &str_method);
      break;
    case Value::Type::kDict:
      if (in(kDictMethods, name)) return bind(self, name, &dict_method);
      if (in(kDictMutators, name)) return unsafe(self, name);
      break;
    case Value::Type::kList:
      if (self.seq_kind() == SeqKind::kList || self.seq_kind() == SeqKind::kTuple) {
        if (in(kListMethods, name) && (self.seq_kind() == SeqKind::kList || name == "count" || name == "index"))
          return bind(self, name, &list_method);
        if (self.seq_kind() == SeqKind::kList && in(kListMutators, name)) return unsafe(self, name);
      }
      break;
    default:
      break;
  }
  return Value::undefined();
}

std::vector<std::pair<std::string, Value>> make_globals() {
  std::vector<std::pair<std::string, Value>> g;
  auto add = [&](const char* name, Function::Body body) {
    g.emplace_back(name, Value::object(std::make_shared<Function>(name, std::move(body))));
  };
  add("range", [](Ctx&, const CallArgs& args) {
    if (!args.kw.empty()) fail("range() takes no keyword arguments");
    if (args.pos.empty() || args.pos.size() > 3) fail("range expected 1 to 3 arguments, got " + std::to_string(args.pos.size()));
    int64_t b = 0, e = 0, st = 1;
    std::vector<int64_t> xs;
    for (const Value& v : args.pos) xs.push_back(int_arg(v, 0, "range"));
    if (xs.size() == 1) e = xs[0];
    else b = xs[0], e = xs[1];
    if (xs.size() == 3) st = xs[2];
    if (st == 0) fail("range() arg 3 must not be zero");
    int64_t n = st > 0 ? (e > b ? (e - b + st - 1) / st : 0) : (b > e ? (b - e - st - 1) / -st : 0);
    if (n > 100000) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    std::vector<Value> out;
    for (int64_t i = 0; i < n; ++i) out.emplace_back(b + i * st);
    return Value::list(std::move(out));
  });
  add("dict", [](Ctx&, const CallArgs& args) {
    std::vector<std::pair<std::string, Value>> e;
    if (args.pos.size() > 1) fail("dict expected at most 1 argument, got " + std::to_string(args.pos.size()));
    if (!args.pos.empty()) {
      if (args.pos[0].is_dict()) {
        e = args.pos[0].entries();
      } else {
        for (const Value& pair : iterate(args.pos[0])) {
          std::vector<Value> kv = iterate(pair);
          if (kv.size() != 2) fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
          if (!kv[0].is_string()) fail("dict(): only str keys are supported");
          e.emplace_back(kv[0].as_string(), kv[1]);
        }
      }
    }
    for (const auto& kv : args.kw) e.push_back(kv);
    return Value::dict(std::move(e));
  });
  add("namespace", [](Ctx&, const CallArgs& args) { return make_namespace(args); });
  add("raise_exception", [](Ctx&, const CallArgs& args) -> Value {
    auto a = args.bind("raise_exception", {"message"});
    fail(a[0] ? a[0]->str() : std::string());
  });
  add("strftime_now", [](Ctx& ctx, const CallArgs& args) -> Value {
    auto a = args.bind("strftime_now", {"format"});
    return strftime_py(str_arg(a[0], "strftime_now"), render_options(ctx));
  });
  return g;
}

}  // namespace ragd::engine::jinja
