// A Jinja interpreter for the subset Hugging Face chat templates use, rendering byte for byte as
// transformers does (python jinja2's ImmutableSandboxedEnvironment with trim_blocks and
// lstrip_blocks, keep_trailing_newline off, the loopcontrols extension, HF's globals
// raise_exception / strftime_now and HF's own tojson filter).
//
//   auto t = jinja::Template::compile(source, "tokenizer_config.json chat_template");
//   Result<std::string> text = (*t)->render(jinja::Value::dict({{"messages", msgs}, ...}));
//
// Supported: {{ }}, {% %}, {# #}, whitespace control ({%- -%} {%+ +%}), raw blocks; if / elif /
// else, for (tuple unpacking, inline `if` filter, else, loop.*, break / continue), set (names,
// tuples, namespace attributes, block set with filters), with, filter blocks, macros (defaults,
// keyword arguments, varargs / kwargs), print, HF's generation block; literals, subscripts and
// slices, attributes, calls, every operator and test jinja2 defines, the filters and Python
// str / dict / list methods templates call (docs/design/chat-templates.md lists them). Anything else fails
// at compile time with a Status naming the line and the construct; runtime failures
// (raise_exception, type errors, undefined misuse) are a Status with the message and the line.
//
// Values are JSON-like (none, bool, int64, double, UTF-8 string, list, insertion-ordered dict)
// plus, inside a render, Python's other objects (callables, macros, namespaces, the loop object,
// generators) as opaque Objects. Semantics follow Python 3 / jinja2: int64 arithmetic (overflow is
// an error where Python would grow a big int), str() / repr() of every value, jinja2's default
// Undefined (prints empty, falsy, iterates as empty, raises on attribute / item / arithmetic).
//
// Thread-safety: Value is a value type whose shared parts are immutable; a compiled Template is
// immutable and renders concurrently from any number of threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::engine::jinja {

class Object;  // render-time objects (functions, macros, namespaces, loop, generators); src/jinja/object.h
struct ListData;
struct DictData;

// How a sequence prints and subscripts (Python's list, tuple and dict views).
enum class SeqKind : uint8_t { kList, kTuple, kDictItems, kDictKeys, kDictValues };

class Value {
 public:
  enum class Type : uint8_t { kNone, kUndefined, kBool, kInt, kFloat, kString, kList, kDict, kObject };

  Value() = default;  // none
  Value(std::nullptr_t) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t{i}) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}

  // hint: what was looked up ("'x' is undefined"), the message of the error a misuse raises.
  static Value undefined(std::string hint = {});
  static Value list(std::vector<Value> items, SeqKind kind = SeqKind::kList);
  // A key given twice keeps its first position and its last value (as Python's json.loads).
  static Value dict(std::vector<std::pair<std::string, Value>> items);
  static Value object(std::shared_ptr<Object> o);

  // JSON text to a Value (objects keep their key order; integers that fit int64 stay integers).
  static Result<Value> from_json(std::string_view json);

  // json.dumps(value, ensure_ascii=, indent=, separators=, sort_keys=) byte for byte.
  struct JsonOptions {
    bool ensure_ascii = false;
    std::optional<std::string> indent;        // nullopt: one line; "  ": indent=2
    std::optional<std::string> item_separator;  // default ", " (", " -> "," when indenting)
    std::optional<std::string> key_separator;   // default ": "
    bool sort_keys = false;
  };
  // Undefined and render-time objects are not JSON: an InvalidArgument naming the type.
  Result<std::string> to_json(const JsonOptions& o) const;
  Result<std::string> to_json() const { return to_json(JsonOptions{}); }

  Type type() const { return static_cast<Type>(v_.index()); }
  bool is_none() const { return type() == Type::kNone; }
  bool is_undefined() const { return type() == Type::kUndefined; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_int() const { return type() == Type::kInt; }
  bool is_float() const { return type() == Type::kFloat; }
  bool is_string() const { return type() == Type::kString; }
  bool is_list() const { return type() == Type::kList; }
  bool is_dict() const { return type() == Type::kDict; }
  bool is_object() const { return type() == Type::kObject; }
  // Python's numbers: bool, int, float.
  bool is_number() const { return is_bool() || is_int() || is_float(); }

  // Accessors; each requires the matching type (RAGD_CHECK).
  bool as_bool() const;
  int64_t as_int() const;  // bool and int
  double as_float() const;  // bool, int and float
  const std::string& as_string() const;
  std::span<const Value> items() const;  // list
  SeqKind seq_kind() const;              // list
  const std::vector<std::pair<std::string, Value>>& entries() const;  // dict
  const std::shared_ptr<Object>& as_object() const;
  const std::string& undefined_hint() const;

  // Dict lookup; nullptr when this is not a dict or has no such key.
  const Value* get(std::string_view key) const;

  bool truthy() const;     // Python's bool()
  std::string str() const;   // Python's str(): what {{ value }} prints
  std::string repr() const;  // Python's repr()

 private:
  struct Undef {
    std::shared_ptr<const std::string> hint;
  };
  // Alternative order is Type's order.
  std::variant<std::nullptr_t, Undef, bool, int64_t, double, std::string, std::shared_ptr<const ListData>,
               std::shared_ptr<const DictData>, std::shared_ptr<Object>>
      v_;
};

struct ListData {
  std::vector<Value> items;
  SeqKind kind = SeqKind::kList;
};

struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  const Value* find(std::string_view key) const;
};

struct RenderOptions {
  // The instant strftime_now() formats, as UTC; nullopt: the clock, as local time (Python's
  // datetime.now()). Tests and reproducible prompts pin it.
  std::optional<std::chrono::system_clock::time_point> now;
  // Guards against runaway templates; each exceeded limit fails the render with a Status.
  size_t max_output_bytes = size_t{64} << 20;  // 64 MiB
  int64_t max_loop_iterations = 10'000'000;    // over the whole render
  int max_call_depth = 200;                    // macro recursion
};

class Template {
 public:
  ~Template();
  Template(const Template&) = delete;
  Template& operator=(const Template&) = delete;

  // Parses `source`; errors are InvalidArgument "<name>: line N: ..." naming the unsupported
  // construct or the syntax error.
  static Result<std::unique_ptr<Template>> compile(std::string_view source, std::string name = "template");

  // context: a dict whose entries become the template's variables (above the globals range,
  // dict, namespace, raise_exception, strftime_now). Errors are InvalidArgument
  // "<name>: line N: <message>" (raise_exception's message unchanged after the prefix).
  Result<std::string> render(const Value& context, const RenderOptions& opts = {}) const;

  const std::string& name() const;

  struct Impl;

 private:
  explicit Template(std::unique_ptr<const Impl> impl);
  std::unique_ptr<const Impl> impl_;
};

}  // namespace ragd::engine::jinja
