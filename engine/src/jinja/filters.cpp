// jinja2's filters and tests as the sandboxed environment transformers renders with defines
// them, plus HF's own tojson (json.dumps with ensure_ascii=False, key order kept, no HTML
// escaping; jinja2's built-in tojson sorts keys and escapes <>&' instead). Filters that return
// Python generators (map, select*, reject*, unique, reverse, items, batch) return one-shot
// generators here too, so `x|select(...)` is truthy even when empty and cannot be measured with
// `length` before `list`, as in Python.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "jinja/ast.h"
#include "jinja/text.h"

namespace ragd::engine::jinja {

namespace {

[[noreturn]] void fail_type(std::string_view what, const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  fail(std::string(what) + ": unsupported type '" + type_name(v) + "'");
}

bool flag(const std::optional<Value>& v, bool dflt) { return v ? v->truthy() : dflt; }

int64_t int_param(const std::optional<Value>& v, int64_t dflt, std::string_view what) {
  if (!v) return dflt;
  if (!v->is_int() && !v->is_bool()) fail(std::string(what) + ": expected an integer, got '" + type_name(*v) + "'");
  return v->as_int();
}

Value ignore_case(const Value& v) { return v.is_string() ? Value(text::lower(v.as_string())) : v; }

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then item 0 (getitem semantics).
Value get_path(const Value& item, const Value& attribute, const std::optional<Value>& dflt = std::nullopt) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    for (const std::string& p : text::split(attribute.as_string(), std::string("."), -1)) {
      const bool digits = !p.empty() && std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; });
      parts.push_back(digits ? Value(static_cast<int64_t>(std::stoll(p))) : Value(p));
    }
  } else if (!attribute.is_none()) {
    parts.push_back(attribute);
  }
  Value v = item;
  for (const Value& p : parts) {
    v = getitem(v, p);
    if (dflt && !dflt->is_none() && v.is_undefined()) v = *dflt;
  }
  return v;
}

TestFn test_or_fail(const Value& name) {
  if (!name.is_string()) fail("test name must be a string");
  TestFn t = find_test(name.as_string());
  if (t == nullptr) fail("No test named '" + name.as_string() + "'.");
  return t;
}

// select / reject / selectattr / rejectattr.
Value select_impl(Ctx& c, const Value& input, const CallArgs& args, bool by_attr, bool keep) {
  size_t off = 0;
  Value attr;
  if (by_attr) {
    if (args.pos.empty()) fail("Missing parameter for attribute name");
    attr = args.pos[0];
    off = 1;
  }
  TestFn test = nullptr;
  CallArgs test_args;
  if (args.pos.size() > off) {
    test = test_or_fail(args.pos[off]);
    test_args.pos.assign(args.pos.begin() + static_cast<std::ptrdiff_t>(off + 1), args.pos.end());
    test_args.kw = args.kw;
  }
  std::vector<Value> out;
  for (Value& item : iterate(input)) {
    const Value probe = by_attr ? get_path(item, attr) : item;
    const bool ok = test ? test(c, probe, test_args) : probe.truthy();
    if (ok == keep) out.push_back(std::move(item));
  }
  return make_generator(std::move(out));
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(ch);
    }
  }
  return out;
}

// Python's round(x, n) for floats: correctly rounded, ties to even on the exact binary value.
double round_float(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0 && n <= 300) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  if (n > 300) return x;
  const double p = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / p) * p;
}

// ---- filters ----

Value f_abs(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("abs", {});
  if (v.is_bool() || v.is_int()) {
    if (v.as_int() == INT64_MIN) fail("integer overflow (ragd's integers are 64-bit)");
    return static_cast<int64_t>(std::llabs(v.as_int()));
  }
  if (v.is_float()) return std::fabs(v.as_float());
  if (v.is_undefined()) fail_undefined(v);
  fail("bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("attr", {"name"});
  if (!p[0] || !p[0]->is_string()) fail("attr(): the attribute name must be a str");
  const std::string& name = p[0]->as_string();
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_object()) return v.as_object()->getattr(name);
  if (!name.empty() && name[0] != '_') {
    Value m = bound_method(v, name);
    if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
  }
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", object_type_repr(v), name));
}

Value f_batch(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("batch", {"linecount", "fill_with"});
  const int64_t n = int_param(p[0], 0, "batch");
  if (n <= 0) fail("batch(): linecount must be positive");
  std::vector<Value> rows, cur;
  for (Value& x : iterate(v)) {
    if (static_cast<int64_t>(cur.size()) == n) rows.push_back(Value::list(std::move(cur))), cur.clear();
    cur.push_back(std::move(x));
  }
  if (!cur.empty()) {
    if (p[1] && !p[1]->is_none())
      while (static_cast<int64_t>(cur.size()) < n) cur.push_back(*p[1]);
    rows.push_back(Value::list(std::move(cur)));
  }
  return make_generator(std::move(rows));
}

Value f_capitalize(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("capitalize", {});
  return text::capitalize(v.str());
}

Value f_center(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("center", {"width"});
  const int64_t width = int_param(p[0], 80, "center");
  const std::string s = v.str();
  const auto len = static_cast<int64_t>(utf8_length(s));
  if (width <= len) return s;
  const int64_t total = width - len, left = total / 2 + (total & width & 1);
  return std::string(static_cast<size_t>(left), ' ') + s + std::string(static_cast<size_t>(total - left), ' ');
}

Value f_default(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("default", {"default_value", "boolean"});
  if (v.is_undefined() || (flag(p[1], false) && !v.truthy())) return p[0] ? *p[0] : Value("");
  return v;
}

Value f_dictsort(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("dictsort", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) fail_type("dictsort", v);
  const bool cs = flag(p[0], false), rev = flag(p[2], false);
  const std::string by = p[1] ? p[1]->str() : "key";
  if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, x] : v.entries()) {
    Value key = by == "key" ? Value(k) : x;
    keyed.emplace_back(cs ? key : ignore_case(key), Value::list({Value(k), x}, SeqKind::kTuple));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first, "<") : compare(x.first, y.first, "<");
  });
  std::vector<Value> out;
  for (auto& [_, pair] : keyed) out.push_back(std::move(pair));
  return Value::list(std::move(out));
}

Value f_escape(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("escape", {});
  return html_escape(v.str());
}

Value f_first(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("first", {});
  if (v.is_object()) {
    if (auto x = v.as_object()->next()) return *x;
    if (dynamic_cast<const Generator*>(v.as_object().get()) == nullptr) fail_type("first", v);
  } else {
    std::vector<Value> items = iterate(v);
    if (!items.empty()) return items.front();
  }
  return Value::undefined("No first item, sequence was empty.");
}

Value f_float(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("float", {"default"});
  if (auto d = to_float(v)) return *d;
  return p[0] ? *p[0] : Value(0.0);
}

Value f_indent(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("indent", {"width", "first", "blank"});
  if (!v.is_string()) {
    if (v.is_undefined()) fail_undefined(v);
    fail("indent(): can only concatenate str (not \"" + type_name(v) + "\") to str");
  }
  std::string ind;
  if (p[0] && p[0]->is_string()) ind = p[0]->as_string();
  else ind = std::string(static_cast<size_t>(std::max<int64_t>(0, int_param(p[0], 4, "indent"))), ' ');
  const std::vector<std::string> lines = text::splitlines(v.as_string() + "\n", false);
  std::string rv;
  if (flag(p[2], false)) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += '\n';
      if (!lines[i].empty()) rv += ind;
      rv += lines[i];
    }
  }
  if (flag(p[1], false)) rv = ind + rv;
  return rv;
}

Value f_int(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("int", {"default", "base"});
  if (auto i = to_int(v, static_cast<int>(int_param(p[1], 10, "int")))) return *i;
  return p[0] ? *p[0] : Value(0);
}

Value f_items(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("items", {});
  if (v.is_undefined()) return make_generator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.entries()) out.push_back(Value::list({Value(k), x}, SeqKind::kTuple));
  return make_generator(std::move(out));
}

Value f_join(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("join", {"d", "attribute"});
  const std::string d = p[0] ? p[0]->str() : "";
  std::string out;
  bool first = true;
  for (const Value& x : iterate(v)) {
    if (!first) out += d;
    first = false;
    out += (p[1] && !p[1]->is_none() ? get_path(x, *p[1]) : x).str();
  }
  return out;
}

Value f_last(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("last", {});
  if (v.is_object() || v.is_none() || v.is_number()) fail(fmt::format("'{}' object is not reversible", type_name(v)));
  std::vector<Value> items = iterate(v);
  if (!items.empty()) return items.back();
  return Value::undefined("No last item, sequence was empty.");
}

Value f_length(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("length", {});
  return length(v);
}

Value f_list(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("list", {});
  return Value::list(iterate(v));
}

Value f_lower(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("lower", {});
  return text::lower(v.str());
}

Value f_map(Ctx& c, const Value& v, const CallArgs& a) {
  if (!v.truthy()) return make_generator({});
  std::vector<Value> out;
  const Value* attribute = nullptr;
  std::optional<Value> dflt;
  for (const auto& [k, x] : a.kw)
    if (k == "attribute") attribute = &x;
  if (a.pos.empty() && attribute != nullptr) {
    for (const auto& [k, x] : a.kw) {
      if (k == "default") dflt = x;
      else if (k != "attribute") fail("Unexpected keyword argument '" + k + "'");
    }
    for (const Value& item : iterate(v)) out.push_back(get_path(item, *attribute, dflt));
    return make_generator(std::move(out));
  }
  if (a.pos.empty()) fail("map requires a filter argument");
  if (!a.pos[0].is_string()) fail("map(): the filter name must be a str");
  FilterFn f = find_filter(a.pos[0].as_string());
  if (f == nullptr) fail("No filter named '" + a.pos[0].as_string() + "'.");
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (const Value& item : iterate(v)) out.push_back(f(c, item, rest));
  return make_generator(std::move(out));
}

Value min_max(const Value& v, const CallArgs& a, bool want_max) {
  auto p = a.bind(want_max ? "max" : "min", {"case_sensitive", "attribute"});
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  auto key = [&](const Value& x) {
    Value k = p[1] && !p[1]->is_none() ? get_path(x, *p[1]) : x;
    return flag(p[0], false) ? k : ignore_case(k);
  };
  size_t best = 0;
  Value best_key = key(items[0]);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = key(items[i]);
    if (want_max ? compare(best_key, k, "<") : compare(k, best_key, "<")) best = i, best_key = std::move(k);
  }
  return items[best];
}

Value f_max(Ctx&, const Value& v, const CallArgs& a) { return min_max(v, a, true); }
Value f_min(Ctx&, const Value& v, const CallArgs& a) { return min_max(v, a, false); }

Value f_reject(Ctx& c, const Value& v, const CallArgs& a) { return select_impl(c, v, a, false, false); }
Value f_rejectattr(Ctx& c, const Value& v, const CallArgs& a) { return select_impl(c, v, a, true, false); }
Value f_select(Ctx& c, const Value& v, const CallArgs& a) { return select_impl(c, v, a, false, true); }
Value f_selectattr(Ctx& c, const Value& v, const CallArgs& a) { return select_impl(c, v, a, true, true); }

Value f_replace(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("replace", {"old", "new", "count"});
  if (!p[0] || !p[1]) fail("replace() missing required argument");
  const int64_t count = p[2] && !p[2]->is_none() ? int_param(p[2], -1, "replace") : -1;
  return text::replace(v.str(), p[0]->str(), p[1]->str(), count);
}

Value f_reverse(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("reverse", {});
  if (v.is_string()) {
    std::u32string u = utf8_decode(v.as_string());
    std::reverse(u.begin(), u.end());
    return utf8_encode(u);
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (v.is_object()) return Value::list(std::move(items));  // list(value).reverse()
  return make_generator(std::move(items));
}

Value f_round(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("round", {"precision", "method"});
  const int64_t prec = int_param(p[0], 0, "round");
  const std::string method = p[1] ? p[1]->str() : "common";
  if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_number()) fail("type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (!v.is_float()) {
      if (prec >= 0) return v.as_int();
      const double r = round_float(static_cast<double>(v.as_int()), prec);
      return static_cast<int64_t>(r);
    }
    return round_float(v.as_float(), prec);
  }
  const double scale = std::pow(10.0, static_cast<double>(prec));
  const double x = v.as_float() * scale;
  const double r = method == "ceil" ? std::ceil(x) : std::floor(x);
  return r / scale;
}

Value f_safe(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("safe", {});
  return v.str();
}

Value f_sort(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("sort", {"reverse", "case_sensitive", "attribute"});
  const bool rev = flag(p[0], false), cs = flag(p[1], false);
  std::vector<Value> attrs;
  if (p[2] && p[2]->is_string()) {
    for (const std::string& s : text::split(p[2]->as_string(), std::string(","), -1))
      attrs.emplace_back(text::strip(s, std::nullopt, true, true));
  } else if (p[2] && !p[2]->is_none()) {
    attrs.push_back(*p[2]);
  }
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& x : iterate(v)) {
    Value k;
    if (attrs.empty()) {
      k = cs ? x : ignore_case(x);
    } else {
      std::vector<Value> parts;
      for (const Value& at : attrs) parts.push_back(cs ? get_path(x, at) : ignore_case(get_path(x, at)));
      k = attrs.size() == 1 ? parts[0] : Value::list(std::move(parts));
    }
    keyed.emplace_back(std::move(k), std::move(x));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return rev ? compare(y.first, x.first, "<") : compare(x.first, y.first, "<");
  });
  std::vector<Value> out;
  for (auto& [_, x] : keyed) out.push_back(std::move(x));
  return Value::list(std::move(out));
}

Value f_string(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("string", {});
  return v.str();
}

Value f_sum(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("sum", {"attribute", "start"});
  Value total = p[1] ? *p[1] : Value(0);
  for (const Value& x : iterate(v)) total = add(total, p[0] && !p[0]->is_none() ? get_path(x, *p[0]) : x);
  return total;
}

Value f_title(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("title", {});
  // jinja2: split before runs of [-\s({[<], then item[0].upper() + item[1:].lower() per piece.
  const std::u32string u = utf8_decode(v.str());
  auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || text::is_space(c); };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    const bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    const std::string piece = utf8_encode(std::u32string_view(u).substr(i, j - i));
    if (sep) {
      out += piece;
    } else {
      out += text::upper(utf8_encode(std::u32string_view(u).substr(i, 1)));
      out += text::lower(utf8_encode(std::u32string_view(u).substr(i + 1, j - i - 1)));
    }
    i = j;
  }
  return out;
}

// HF's tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("tojson", {"ensure_ascii", "indent", "separators", "sort_keys"});
  Value::JsonOptions o;
  o.ensure_ascii = flag(p[0], false);
  if (p[1] && !p[1]->is_none()) {
    if (p[1]->is_string()) o.indent = p[1]->as_string();
    else o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, int_param(p[1], 0, "tojson"))), ' ');
  }
  if (p[2] && !p[2]->is_none()) {
    std::vector<Value> seps = iterate(*p[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string())
      fail("tojson(): separators must be an (item_separator, key_separator) pair of str");
    o.item_separator = seps[0].as_string();
    o.key_separator = seps[1].as_string();
  }
  o.sort_keys = flag(p[3], false);
  auto r = v.to_json(o);
  if (!r.ok()) fail(r.status().message());
  return std::move(*r);
}

Value f_trim(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("trim", {"chars"});
  std::optional<std::string> chars;
  if (p[0] && !p[0]->is_none()) chars = p[0]->str();
  return text::strip(v.str(), chars, true, true);
}

Value f_unique(Ctx&, const Value& v, const CallArgs& a) {
  auto p = a.bind("unique", {"case_sensitive", "attribute"});
  const bool cs = flag(p[0], false);
  std::vector<Value> seen, out;
  for (Value& x : iterate(v)) {
    Value k = p[1] && !p[1]->is_none() ? get_path(x, *p[1]) : x;
    if (!cs) k = ignore_case(k);
    if (k.is_list() && k.seq_kind() != SeqKind::kTuple) fail("unhashable type: '" + type_name(k) + "'");
    if (k.is_dict()) fail("unhashable type: 'dict'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) {
      seen.push_back(std::move(k));
      out.push_back(std::move(x));
    }
  }
  return make_generator(std::move(out));
}

Value f_upper(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("upper", {});
  return text::upper(v.str());
}

Value f_wordcount(Ctx&, const Value& v, const CallArgs& a) {
  a.bind("wordcount", {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(v.str())) {
    bool known = false;
    std::string one;
    append_utf8(one, c);
    const bool w = c == '_' || text::predicate("isalnum", one, &known);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return n;
}

// ---- tests ----

bool t_defined(Ctx&, const Value& v, const CallArgs&) { return !v.is_undefined(); }
bool t_undefined(Ctx&, const Value& v, const CallArgs&) { return v.is_undefined(); }
bool t_none(Ctx&, const Value& v, const CallArgs&) { return v.is_none(); }
bool t_boolean(Ctx&, const Value& v, const CallArgs&) { return v.is_bool(); }
bool t_true(Ctx&, const Value& v, const CallArgs&) { return v.is_bool() && v.as_bool(); }
bool t_false(Ctx&, const Value& v, const CallArgs&) { return v.is_bool() && !v.as_bool(); }
bool t_integer(Ctx&, const Value& v, const CallArgs&) { return v.is_int(); }
bool t_float(Ctx&, const Value& v, const CallArgs&) { return v.is_float(); }
bool t_number(Ctx&, const Value& v, const CallArgs&) { return v.is_number(); }
bool t_string(Ctx&, const Value& v, const CallArgs&) { return v.is_string(); }
bool t_mapping(Ctx&, const Value& v, const CallArgs&) { return v.is_dict(); }
bool t_iterable(Ctx&, const Value& v, const CallArgs&) { return is_iterable(v); }
bool t_sequence(Ctx&, const Value& v, const CallArgs&) { return is_sequence(v); }
bool t_callable(Ctx&, const Value& v, const CallArgs&) { return is_callable(v); }
bool t_escaped(Ctx&, const Value&, const CallArgs&) { return false; }
bool t_odd(Ctx&, const Value& v, const CallArgs&) { return equal(mod(v, Value(2)), Value(1)); }
bool t_even(Ctx&, const Value& v, const CallArgs&) { return equal(mod(v, Value(2)), Value(0)); }

const Value& arg1(const CallArgs& a, const char* what) {
  if (a.pos.size() + a.kw.size() != 1) fail(std::string(what) + "() takes exactly one argument");
  return a.pos.empty() ? a.kw[0].second : a.pos[0];
}

bool t_divisibleby(Ctx&, const Value& v, const CallArgs& a) {
  return equal(mod(v, arg1(a, "divisibleby")), Value(0));
}
bool t_eq(Ctx&, const Value& v, const CallArgs& a) { return equal(v, arg1(a, "eq")); }
bool t_ne(Ctx&, const Value& v, const CallArgs& a) { return !equal(v, arg1(a, "ne")); }
bool t_lt(Ctx&, const Value& v, const CallArgs& a) { return compare(v, arg1(a, "lt"), "<"); }
bool t_le(Ctx&, const Value& v, const CallArgs& a) { return compare(v, arg1(a, "le"), "<="); }
bool t_gt(Ctx&, const Value& v, const CallArgs& a) { return compare(v, arg1(a, "gt"), ">"); }
bool t_ge(Ctx&, const Value& v, const CallArgs& a) { return compare(v, arg1(a, "ge"), ">="); }
bool t_in(Ctx&, const Value& v, const CallArgs& a) { return contains(arg1(a, "in"), v); }
bool t_lower(Ctx&, const Value& v, const CallArgs&) {
  bool known;
  return text::predicate("islower", v.str(), &known);
}
bool t_upper(Ctx&, const Value& v, const CallArgs&) {
  bool known;
  return text::predicate("isupper", v.str(), &known);
}
bool t_sameas(Ctx&, const Value& v, const CallArgs& a) {
  // Python's `is`: None / True / False and CPython's cached small ints are singletons.
  const Value& o = arg1(a, "sameas");
  if (v.type() != o.type()) return false;
  if (v.is_none() || v.is_bool()) return equal(v, o);
  if (v.is_int()) return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
  if (v.is_object()) return v.as_object() == o.as_object();
  return false;
}
bool t_filter(Ctx&, const Value& v, const CallArgs&) { return v.is_string() && find_filter(v.as_string()) != nullptr; }
bool t_test(Ctx&, const Value& v, const CallArgs&) { return v.is_string() && find_test(v.as_string()) != nullptr; }

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};
constexpr FilterEntry kFilters[] = {
    {"abs", f_abs},         {"attr", f_attr},
    {"batch", f_batch},     {"capitalize", f_capitalize},
    {"center", f_center},   {"count", f_length},
    {"d", f_default},       {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},
    {"escape", f_escape},   {"first", f_first},
    {"float", f_float},     {"forceescape", f_escape},
    {"indent", f_indent},   {"int", f_int},
    {"items", f_items},     {"join", f_join},
    {"last", f_last},       {"length", f_length},
    {"list", f_list},       {"lower", f_lower},
    {"map", f_map},         {"max", f_max},
    {"min", f_min},         {"reject", f_reject},
    {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse}, {"round", f_round},
    {"safe", f_safe},       {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort},
    {"string", f_string},   {"sum", f_sum},
    {"title", f_title},     {"tojson", f_tojson},
    {"trim", f_trim},       {"unique", f_unique},
    {"upper", f_upper},     {"wordcount", f_wordcount},
};

struct TestEntry {
  std::string_view name;
  TestFn fn;
};
constexpr TestEntry kTests[] = {
    {"boolean", t_boolean}, {"callable", t_callable}, {"defined", t_defined}, {"divisibleby", t_divisibleby},
    {"eq", t_eq},           {"equalto", t_eq},        {"==", t_eq},           {"escaped", t_escaped},
    {"even", t_even},       {"false", t_false},       {"filter", t_filter},   {"float", t_float},
    {"ge", t_ge},           {">=", t_ge},             {"gt", t_gt},           {"greaterthan", t_gt},
    {">", t_gt},            {"in", t_in},             {"integer", t_integer}, {"iterable", t_iterable},
    {"le", t_le},           {"<=", t_le},             {"lower", t_lower},     {"lt", t_lt},
    {"lessthan", t_lt},     {"<", t_lt},              {"mapping", t_mapping}, {"ne", t_ne},
    {"!=", t_ne},           {"none", t_none},         {"number", t_number},   {"odd", t_odd},
    {"sameas", t_sameas},   {"sequence", t_sequence}, {"string", t_string},   {"test", t_test},
    {"true", t_true},       {"undefined", t_undefined}, {"upper", t_upper},
};

}  // namespace

FilterFn find_filter(std::string_view name) {
  for (const auto& f : kFilters)
    if (f.name == name) return f.fn;
  return nullptr;
}

TestFn find_test(std::string_view name) {
  for (const auto& t : kTests)
    if (t.name == name) return t.fn;
  return nullptr;
}

}  // namespace ragd::engine::jinja
