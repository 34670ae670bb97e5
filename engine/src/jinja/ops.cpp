// Python 3 semantics of the operators, lookups and conversions jinja2 compiles templates to
// (see object.h): numeric tower bool < int < float, str / list / tuple sequences, dict key lookup,
// jinja2's sandboxed getattr / getitem fallbacks, Undefined raising on misuse.
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "jinja/object.h"
#include "jinja/text.h"

namespace ragd::engine::jinja {

void fail(std::string message) { throw RenderError{std::move(message)}; }

void fail_undefined(const Value& v) {
  const std::string& hint = v.undefined_hint();
  fail(hint.empty() ? "value is undefined" : hint);
}

std::vector<std::optional<Value>> CallArgs::bind(std::string_view what,
                                                 std::initializer_list<std::string_view> names) const {
  std::vector<std::optional<Value>> out(names.size());
  if (pos.size() > names.size())
    fail(std::string(what) + "() takes at most " + std::to_string(names.size()) + " argument(s) (" +
         std::to_string(pos.size()) + " given)");
  for (size_t i = 0; i < pos.size(); ++i) out[i] = pos[i];
  for (const auto& [k, v] : kw) {
    size_t i = 0;
    for (std::string_view n : names) {
      if (n == k) break;
      ++i;
    }
    if (i == names.size()) fail(std::string(what) + "() got an unexpected keyword argument '" + k + "'");
    if (out[i]) fail(std::string(what) + "() got multiple values for argument '" + k + "'");
    out[i] = v;
  }
  return out;
}

// ---- Object defaults, generators, namespaces ----------------------------------------------------

Value Object::getattr(const std::string& name) const {
  return Value::undefined(fmt::format("'{} object' has no attribute '{}'", type_name(), name));
}

bool Object::setattr(const std::string&, Value) { return false; }

Value Object::call(Ctx&, const CallArgs&) const { fail(fmt::format("'{}' object is not callable", type_name())); }

std::string Object::repr() const { fail("cannot print a " + type_name() + " object (Python prints its address)"); }

std::optional<std::vector<Value>> Generator::drain() {
  std::vector<Value> rest(items_.begin() + static_cast<std::ptrdiff_t>(pos_), items_.end());
  pos_ = items_.size();
  return rest;
}

std::optional<Value> Generator::next() {
  if (pos_ >= items_.size()) return std::nullopt;
  return items_[pos_++];
}

Value make_generator(std::vector<Value> items) { return Value::object(std::make_shared<Generator>(std::move(items))); }

Value Namespace::getattr(const std::string& name) const {
  for (const auto& [k, v] : attrs_)
    if (k == name) return v;
  return Value::undefined("'Namespace object' has no attribute '" + name + "'");
}

bool Namespace::setattr(const std::string& name, Value v) {
  for (auto& [k, old] : attrs_)
    if (k == name) {
      old = std::move(v);
      return true;
    }
  attrs_.emplace_back(name, std::move(v));
  return true;
}

std::string Namespace::repr() const {
  std::vector<std::pair<std::string, Value>> e(attrs_);
  return "<Namespace " + Value::dict(std::move(e)).repr() + ">";
}

Value make_namespace(const CallArgs& args) {
  auto ns = std::make_shared<Namespace>();
  if (args.pos.size() > 1) fail("namespace() takes at most 1 positional argument");
  if (!args.pos.empty()) {
    const Value& init = args.pos[0];
    if (init.is_dict()) {
      for (const auto& [k, v] : init.entries()) ns->setattr(k, v);
    } else {
      for (const Value& pair : iterate(init)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2 || !kv[0].is_string()) fail("namespace(): expected a mapping or (key, value) pairs");
        ns->setattr(kv[0].as_string(), kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.kw) ns->setattr(k, v);
  return Value::object(std::move(ns));
}

// ---- types ---------------------------------------------------------------------------------

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Value::Type::kNone: return "NoneType";
    case Value::Type::kUndefined: return "Undefined";
    case Value::Type::kBool: return "bool";
    case Value::Type::kInt: return "int";
    case Value::Type::kFloat: return "float";
    case Value::Type::kString: return "str";
    case Value::Type::kList:
      switch (v.seq_kind()) {
        case SeqKind::kList: return "list";
        case SeqKind::kTuple: return "tuple";
        case SeqKind::kDictItems: return "dict_items";
        case SeqKind::kDictKeys: return "dict_keys";
        case SeqKind::kDictValues: return "dict_values";
      }
      return "list";
    case Value::Type::kDict: return "dict";
    case Value::Type::kObject: return v.as_object()->type_name();
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  return type_name(v) + " object";
}

namespace {

[[noreturn]] void fail_operands(std::string_view op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  fail("unsupported operand type(s) for " + std::string(op) + ": '" + type_name(a) + "' and '" + type_name(b) + "'");
}

bool is_intlike(const Value& v) { return v.is_bool() || v.is_int(); }

// Python's list/tuple kinds that support indexing, + and *.
bool is_indexable_seq(const Value& v) {
  return v.is_list() && (v.seq_kind() == SeqKind::kList || v.seq_kind() == SeqKind::kTuple);
}

[[noreturn]] void overflow() { fail("integer overflow (ragd's integers are 64-bit)"); }

int64_t add_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t sub_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t mul_checked(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

Value repeat(const Value& seq, int64_t n) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (n > 0 && s.size() > (size_t{256} << 20) / static_cast<size_t>(n)) fail("repeated string too large");
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return out;
  }
  const auto items = seq.items();
  if (n > 0 && items.size() > (size_t{16} << 20) / static_cast<size_t>(n)) fail("repeated list too large");
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.seq_kind());
}

// CPython's float floor division and modulo (floatobject.c's divmod).
std::pair<double, double> float_divmod(double vx, double wx) {
  if (wx == 0.0) fail("float division by zero");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return {floordiv, mod};
}

std::pair<int64_t, int64_t> int_divmod(int64_t a, int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  if (a == std::numeric_limits<int64_t>::min() && b == -1) overflow();
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) {
    q -= 1;
    r += b;
  }
  return {q, r};
}

}  // namespace

// ---- comparison ----------------------------------------------------------------------------

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return a.as_int() == b.as_int();
    return a.as_float() == b.as_float();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kNone:
    case Value::Type::kUndefined:
      return true;
    case Value::Type::kString:
      return a.as_string() == b.as_string();
    case Value::Type::kList: {
      if (a.seq_kind() != b.seq_kind()) return false;
      const auto x = a.items(), y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equal(x[i], y[i])) return false;
      return true;
    }
    case Value::Type::kDict: {
      if (a.entries().size() != b.entries().size()) return false;
      for (const auto& [k, v] : a.entries()) {
        const Value* o = b.get(k);
        if (o == nullptr || !equal(v, *o)) return false;
      }
      return true;
    }
    case Value::Type::kObject:
      return a.as_object() == b.as_object();
    default:
      return false;
  }
}

bool compare(const Value& a, const Value& b, std::string_view op) {
  auto apply = [&](auto x, auto y) {
    if (op == "<") return x < y;
    if (op == "<=") return x <= y;
    if (op == ">") return x > y;
    return x >= y;
  };
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return apply(a.as_int(), b.as_int());
    return apply(a.as_float(), b.as_float());
  }
  if (a.is_string() && b.is_string()) return apply(a.as_string().compare(b.as_string()), 0);
  if (is_indexable_seq(a) && is_indexable_seq(b) && a.seq_kind() == b.seq_kind()) {
    const auto x = a.items(), y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equal(x[i], y[i])) return compare(x[i], y[i], op);
    return apply(x.size(), y.size());
  }
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  fail("'" + std::string(op) + "' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) +
       "'");
}

// ---- arithmetic ----------------------------------------------------------------------------

Value add(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return add_checked(a.as_int(), b.as_int());
    return a.as_float() + b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.as_string() + b.as_string();
  if (is_indexable_seq(a) && is_indexable_seq(b)) {
    if (a.seq_kind() != b.seq_kind())
      fail("can only concatenate " + type_name(a) + " (not \"" + type_name(b) + "\") to " + type_name(a));
    std::vector<Value> out(a.items().begin(), a.items().end());
    out.insert(out.end(), b.items().begin(), b.items().end());
    return Value::list(std::move(out), a.seq_kind());
  }
  if (a.is_string() && !b.is_undefined() && !a.is_undefined())
    fail("can only concatenate str (not \"" + type_name(b) + "\") to str");
  fail_operands("+", a, b);
}

Value sub(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return sub_checked(a.as_int(), b.as_int());
    return a.as_float() - b.as_float();
  }
  fail_operands("-", a, b);
}

Value mul(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return mul_checked(a.as_int(), b.as_int());
    return a.as_float() * b.as_float();
  }
  if ((a.is_string() || is_indexable_seq(a)) && is_intlike(b)) return repeat(a, b.as_int());
  if (is_intlike(a) && (b.is_string() || is_indexable_seq(b))) return repeat(b, a.as_int());
  fail_operands("*", a, b);
}

Value truediv(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (b.as_float() == 0.0) fail(is_intlike(b) && is_intlike(a) ? "division by zero" : "float division by zero");
    return a.as_float() / b.as_float();
  }
  fail_operands("/", a, b);
}

Value floordiv(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return int_divmod(a.as_int(), b.as_int()).first;
    return float_divmod(a.as_float(), b.as_float()).first;
  }
  fail_operands("//", a, b);
}

Value mod(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) return int_divmod(a.as_int(), b.as_int()).second;
    return float_divmod(a.as_float(), b.as_float()).second;
  }
  if (a.is_string() && !b.is_undefined()) fail("printf-style string formatting ('...' % args) is not supported");
  fail_operands("%", a, b);
}

Value power(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (is_intlike(a) && is_intlike(b)) {
      const int64_t base = a.as_int(), e = b.as_int();
      if (e < 0) {
        if (base == 0) fail("0.0 cannot be raised to a negative power");
        return std::pow(static_cast<double>(base), static_cast<double>(e));
      }
      int64_t r = 1, x = base;
      for (int64_t k = e; k > 0; k >>= 1) {
        if (k & 1) r = mul_checked(r, x);
        if (k > 1) x = mul_checked(x, x);
      }
      return r;
    }
    const double x = a.as_float(), y = b.as_float();
    if (x == 0.0 && y < 0) fail("0.0 cannot be raised to a negative power");
    if (x < 0 && std::floor(y) != y) fail("a negative number raised to a fractional power is complex");
    return std::pow(x, y);
  }
  fail_operands("** or pow()", a, b);
}

Value negate(const Value& a) {
  if (is_intlike(a)) {
    if (a.as_int() == std::numeric_limits<int64_t>::min()) overflow();
    return -a.as_int();
  }
  if (a.is_float()) return -a.as_float();
  if (a.is_undefined()) fail_undefined(a);
  fail("bad operand type for unary -: '" + type_name(a) + "'");
}

Value plus(const Value& a) {
  if (is_intlike(a)) return a.as_int();
  if (a.is_float()) return a;
  if (a.is_undefined()) fail_undefined(a);
  fail("bad operand type for unary +: '" + type_name(a) + "'");
}

// ---- membership, lookups -------------------------------------------------------------------

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::kString:
      if (!item.is_string()) {
        if (item.is_undefined()) fail_undefined(item);
        fail("'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::kList:
      for (const Value& v : container.items())
        if (equal(v, item)) return true;
      return false;
    case Value::Type::kDict:
      if (item.is_list() || item.is_dict()) fail("unhashable type: '" + type_name(item) + "'");
      return item.is_string() && container.get(item.as_string()) != nullptr;
    case Value::Type::kUndefined:
      return false;
    case Value::Type::kObject: {
      Object& o = *container.as_object();
      bool iterable = false;
      while (auto v = o.next()) {
        iterable = true;
        if (equal(*v, item)) return true;
      }
      if (iterable || dynamic_cast<Generator*>(&o) != nullptr) return false;
      [[fallthrough]];
    }
    default:
      fail("argument of type '" + type_name(container) + "' is not iterable");
  }
}

Value getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_object()) return obj.as_object()->getattr(name);
  if (!name.empty() && name[0] != '_') {
    Value m = bound_method(obj, name);
    if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
  }
  if (obj.is_dict()) {
    if (const Value* v = obj.get(name)) return *v;
  }
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + name + "'");
}

namespace {

// Python's PySlice_AdjustIndices for one bound.
int64_t adjust_bound(const Value& v, int64_t len, int64_t step, bool is_start) {
  if (v.is_none()) {
    if (step > 0) return is_start ? 0 : len;
    return is_start ? len - 1 : -1;
  }
  int64_t x = v.as_int();
  if (x < 0) {
    x += len;
    if (x < 0) x = step < 0 ? -1 : 0;
  } else if (x >= len) {
    x = step < 0 ? len - 1 : len;
  }
  return x;
}

}  // namespace

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  for (const Value* b : {&start, &stop, &step})
    if (!b->is_none() && !is_intlike(*b))
      return Value::undefined("'" + object_type_repr(obj) + "' has no element slice");
  const int64_t st = step.is_none() ? 1 : step.as_int();
  if (st == 0) fail("slice step cannot be zero");
  std::vector<size_t> picks;
  auto collect = [&](int64_t len) {
    const int64_t b = adjust_bound(start, len, st, true), e = adjust_bound(stop, len, st, false);
    if (st > 0)
      for (int64_t i = b; i < e; i += st) picks.push_back(static_cast<size_t>(i));
    else
      for (int64_t i = b; i > e; i += st) picks.push_back(static_cast<size_t>(i));
  };
  if (obj.is_string()) {
    const std::u32string u = utf8_decode(obj.as_string());
    collect(static_cast<int64_t>(u.size()));
    std::u32string out;
    for (size_t i : picks) out.push_back(u[i]);
    return utf8_encode(out);
  }
  if (is_indexable_seq(obj)) {
    const auto items = obj.items();
    collect(static_cast<int64_t>(items.size()));
    std::vector<Value> out;
    for (size_t i : picks) out.push_back(items[i]);
    return Value::list(std::move(out), obj.seq_kind());
  }
  return Value::undefined("'" + object_type_repr(obj) + "' has no element slice");
}

Value getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.get(key.as_string())) return *v;
    } else if (key.is_list() && key.seq_kind() != SeqKind::kTuple) {
      fail("unhashable type: '" + type_name(key) + "'");
    }
  } else if ((obj.is_string() || is_indexable_seq(obj)) && is_intlike(key)) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      const std::u32string u = utf8_decode(obj.as_string());
      const auto n = static_cast<int64_t>(u.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return utf8_encode(std::u32string_view(u).substr(static_cast<size_t>(i), 1));
    } else {
      const auto items = obj.items();
      const auto n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return items[static_cast<size_t>(i)];
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no element " + key.repr());
  }
  if (key.is_string()) {
    if (obj.is_object()) return obj.as_object()->getattr(key.as_string());
    if (!key.as_string().empty() && key.as_string()[0] != '_') {
      Value m = bound_method(obj, key.as_string());
      if (!m.is_undefined() || !m.undefined_hint().empty()) return m;
    }
    return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + key.as_string() + "'");
  }
  return Value::undefined("'" + object_type_repr(obj) + "' has no element " + key.repr());
}

// ---- iteration -----------------------------------------------------------------------------

std::vector<Value> iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
      return {};
    case Value::Type::kList:
      return {v.items().begin(), v.items().end()};
    case Value::Type::kDict: {
      std::vector<Value> keys;
      for (const auto& [k, _] : v.entries()) keys.emplace_back(k);
      return keys;
    }
    case Value::Type::kString: {
      std::vector<Value> chars;
      const std::string& s = v.as_string();
      for (size_t i = 0; i < s.size();) {
        size_t n = 1;
        while (i + n < s.size() && utf8_continuation(s[i + n])) ++n;
        chars.emplace_back(s.substr(i, n));
        i += n;
      }
      return chars;
    }
    case Value::Type::kObject:
      if (auto items = v.as_object()->drain()) return std::move(*items);
      [[fallthrough]];
    default:
      fail("'" + type_name(v) + "' object is not iterable");
  }
}

int64_t length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return 0;
    case Value::Type::kString: return static_cast<int64_t>(utf8_length(v.as_string()));
    case Value::Type::kList: return static_cast<int64_t>(v.items().size());
    case Value::Type::kDict: return static_cast<int64_t>(v.entries().size());
    default: fail("object of type '" + type_name(v) + "' has no len()");
  }
}

bool is_iterable(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kString:
    case Value::Type::kList:
    case Value::Type::kDict:
      return true;
    case Value::Type::kObject:
      return dynamic_cast<const Generator*>(v.as_object().get()) != nullptr;
    default:
      return false;
  }
}

bool is_sequence(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kString:
    case Value::Type::kDict:
      return true;
    case Value::Type::kList:
      return is_indexable_seq(v);
    default:
      return false;
  }
}

bool is_callable(const Value& v) { return v.is_object() && v.as_object()->callable(); }

// ---- conversions ---------------------------------------------------------------------------

namespace {

// Python's int(str, base) for bases 2..36 and 0 (prefix-detected).
std::optional<int64_t> parse_int(std::string_view s, int base) {
  const std::string t = text::strip(s, std::nullopt, true, true);
  std::string_view p = t;
  bool neg = false;
  if (!p.empty() && (p[0] == '+' || p[0] == '-')) {
    neg = p[0] == '-';
    p.remove_prefix(1);
  }
  auto prefix = [&](char c) {
    return p.size() >= 2 && p[0] == '0' && (p[1] == c || p[1] == c - 32);
  };
  if (base == 0) {
    base = prefix('x') ? 16 : prefix('o') ? 8 : prefix('b') ? 2 : 10;
    if (base == 10 && p.size() > 1 && p[0] == '0' && p.find_first_not_of("0_") != std::string_view::npos)
      return std::nullopt;  // Python 3 rejects "0123" with base 0
  }
  if ((base == 16 && prefix('x')) || (base == 8 && prefix('o')) || (base == 2 && prefix('b'))) {
    p.remove_prefix(2);
    if (!p.empty() && p[0] == '_') p.remove_prefix(1);
  }
  if (p.empty() || base < 2 || base > 36) return std::nullopt;
  int64_t r = 0;
  bool prev_underscore = true;  // no leading underscore
  for (char c : p) {
    if (c == '_') {
      if (prev_underscore) return std::nullopt;
      prev_underscore = true;
      continue;
    }
    prev_underscore = false;
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
    else return std::nullopt;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(r, base, &r) || __builtin_add_overflow(r, d, &r)) overflow();
  }
  if (prev_underscore) return std::nullopt;
  return neg ? -r : r;
}

}  // namespace

std::optional<double> to_float(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_number()) return v.as_float();
  if (!v.is_string()) return std::nullopt;
  std::string t = text::strip(v.as_string(), std::nullopt, true, true);
  std::string lowered = text::lower(t);
  std::string_view body = lowered;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body.remove_prefix(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    const double x = body == "nan" ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    return lowered[0] == '-' ? -x : x;
  }
  // Digits, one '.', an exponent, underscores between digits: Python's float() grammar.
  std::string clean;
  char prev = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c == '_') {
      const char next = i + 1 < t.size() ? t[i + 1] : 0;
      if (!(prev >= '0' && prev <= '9') || !(next >= '0' && next <= '9')) return std::nullopt;
    } else if ((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
      clean.push_back(c);
    } else {
      return std::nullopt;
    }
    prev = c;
  }
  if (clean.empty() || clean.find_first_of("0123456789") == std::string::npos) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(clean.c_str(), &end);
  if (end != clean.c_str() + clean.size()) return std::nullopt;
  return d;
}

std::optional<int64_t> to_int(const Value& v, int base) {
  if (v.is_undefined()) fail_undefined(v);
  if (is_intlike(v)) return v.as_int();
  if (v.is_float()) {
    const double d = v.as_float();
    if (std::isnan(d) || std::isinf(d)) return std::nullopt;
    if (std::fabs(d) >= 9.2e18) overflow();
    return static_cast<int64_t>(std::trunc(d));
  }
  if (v.is_string()) {
    if (auto i = parse_int(v.as_string(), base)) return i;
    // jinja2's int filter: "42.23"|int is 42.
    if (auto d = to_float(v)) return to_int(Value(*d), 10);
  }
  return std::nullopt;
}

}  // namespace ragd::engine::jinja
