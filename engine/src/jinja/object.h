// Render-time side of the Jinja interpreter: the error a render raises, call arguments, the
// Object base of Python's non-JSON values, and Python's operators over Value (ops.cpp).
// Thread-safety: Objects live inside one render (one thread); compiled templates hold none.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/engine/jinja.h"

namespace ragd::engine::jinja {

// A render failure (jinja2's TemplateError family). Thrown inside the interpreter only; render()
// turns it into a Status, adding the line of the statement or expression being evaluated.
struct RenderError {
  std::string message;
};
[[noreturn]] void fail(std::string message);
// Undefined's own failure (jinja2's UndefinedError): its hint, or a generic message.
[[noreturn]] void fail_undefined(const Value& v);

class Ctx;  // one render's state (eval.cpp)
const RenderOptions& render_options(const Ctx& c);

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;

  // Python-style binding of (positional, keyword) arguments to parameter names: out[i] is the
  // argument for names[i], or nullopt. Fails like Python for unknown keywords, duplicates and too
  // many positionals (`what` names the callee in the message).
  std::vector<std::optional<Value>> bind(std::string_view what, std::initializer_list<std::string_view> names) const;
};

class Object {
 public:
  virtual ~Object() = default;
  // Python's type name, for messages ("function", "Namespace", "LoopContext", "generator").
  virtual std::string type_name() const = 0;
  virtual Value getattr(const std::string& name) const;  // undefined with a hint
  virtual bool setattr(const std::string& name, Value v);  // false: not assignable
  virtual bool callable() const { return false; }
  virtual Value call(Ctx& ctx, const CallArgs& args) const;
  virtual std::string repr() const;  // fails: Python would print an address
  virtual bool truthy() const { return true; }
  // Iterators and generators: the items not consumed yet, consuming them; nullopt when not iterable.
  virtual std::optional<std::vector<Value>> drain() { return std::nullopt; }
  // Next item (consumed), or nullopt at the end / when not iterable.
  virtual std::optional<Value> next() { return std::nullopt; }
};

// A one-shot iterator over precomputed items (Python generators: map, select, unique, reverse...).
class Generator final : public Object {
 public:
  explicit Generator(std::vector<Value> items, std::string type = "generator")
      : items_(std::move(items)), type_(std::move(type)) {}
  std::string type_name() const override { return type_; }
  std::optional<std::vector<Value>> drain() override;
  std::optional<Value> next() override;

 private:
  std::vector<Value> items_;
  size_t pos_ = 0;
  std::string type_;
};

Value make_generator(std::vector<Value> items);

// A builtin function or bound method: a name (for messages) and a body.
class Function final : public Object {
 public:
  using Body = std::function<Value(Ctx&, const CallArgs&)>;
  Function(std::string name, Body body) : name_(std::move(name)), body_(std::move(body)) {}
  std::string type_name() const override { return "builtin_function_or_method"; }
  bool callable() const override { return true; }
  Value call(Ctx& ctx, const CallArgs& args) const override { return body_(ctx, args); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  Body body_;
};

// jinja2's namespace(): a mutable attribute bag, the one way to carry values out of a loop.
class Namespace final : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  Value getattr(const std::string& name) const override;
  bool setattr(const std::string& name, Value v) override;
  std::string repr() const override;

 private:
  std::vector<std::pair<std::string, Value>> attrs_;
};

Value make_namespace(const CallArgs& args);

// ---- Python semantics over Value (ops.cpp) ----------------------------------------------------

std::string type_name(const Value& v);       // "str", "int", "list", "dict", "NoneType", "Undefined"...
std::string object_type_repr(const Value& v);  // jinja2's "'dict object'" spelling, quotes excluded

bool equal(const Value& a, const Value& b);
// a < b (etc.) with Python's rules; TypeError for unordered types. op: "<", "<=", ">", ">=".
bool compare(const Value& a, const Value& b, std::string_view op);

Value add(const Value& a, const Value& b);
Value sub(const Value& a, const Value& b);
Value mul(const Value& a, const Value& b);
Value truediv(const Value& a, const Value& b);
Value floordiv(const Value& a, const Value& b);
Value mod(const Value& a, const Value& b);
Value power(const Value& a, const Value& b);
Value negate(const Value& a);
Value plus(const Value& a);

bool contains(const Value& container, const Value& item);  // `item in container`

// jinja2's environment.getattr (attribute first, then item) and getitem (item first, then attribute).
Value getattr(const Value& obj, const std::string& name);
Value getitem(const Value& obj, const Value& key);
// obj[start:stop:step]; absent bounds are none.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// list(v): str -> characters, dict -> keys, undefined -> empty, generators consumed.
std::vector<Value> iterate(const Value& v);
int64_t length(const Value& v);  // len(v); TypeError when v has none
bool is_iterable(const Value& v);
bool is_sequence(const Value& v);  // has len() and []
bool is_callable(const Value& v);

// Python's int() / float() conversions for the int and float filters (nullopt: ValueError / TypeError).
std::optional<int64_t> to_int(const Value& v, int base);
std::optional<double> to_float(const Value& v);

// A method bound to a str / dict / list receiver (methods.cpp); undefined when there is none.
Value bound_method(const Value& self, const std::string& name);
// The globals: range, dict, namespace, raise_exception, strftime_now (methods.cpp).
std::vector<std::pair<std::string, Value>> make_globals();

}  // namespace ragd::engine::jinja
