// jinja::Value: construction, accessors, Python's str() / repr(), JSON in (simdjson) and out
// (json.dumps byte for byte).
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "jinja/object.h"
#include "jinja/text.h"
#include "ragd/common/check.h"

namespace ragd::engine::jinja {

const Value* DictData::find(std::string_view key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

Value Value::undefined(std::string hint) {
  Value v;
  v.v_ = Undef{hint.empty() ? nullptr : std::make_shared<const std::string>(std::move(hint))};
  return v;
}

Value Value::list(std::vector<Value> items, SeqKind kind) {
  Value v;
  v.v_ = std::shared_ptr<const ListData>(new ListData{std::move(items), kind});
  return v;
}

Value Value::dict(std::vector<std::pair<std::string, Value>> items) {
  auto d = std::make_shared<DictData>();
  d->entries.reserve(items.size());
  for (auto& [k, val] : items) {
    auto it = std::find_if(d->entries.begin(), d->entries.end(), [&](const auto& e) { return e.first == k; });
    if (it != d->entries.end()) it->second = std::move(val);
    else d->entries.emplace_back(std::move(k), std::move(val));
  }
  Value v;
  v.v_ = std::shared_ptr<const DictData>(std::move(d));
  return v;
}

Value Value::object(std::shared_ptr<Object> o) {
  Value v;
  v.v_ = std::move(o);
  return v;
}

bool Value::as_bool() const {
  RAGD_CHECK(is_bool()) << "jinja::Value::as_bool on " << type_name(*this);
  return std::get<bool>(v_);
}

int64_t Value::as_int() const {
  if (is_bool()) return std::get<bool>(v_) ? 1 : 0;
  RAGD_CHECK(is_int()) << "jinja::Value::as_int on " << type_name(*this);
  return std::get<int64_t>(v_);
}

double Value::as_float() const {
  if (is_float()) return std::get<double>(v_);
  return static_cast<double>(as_int());
}

const std::string& Value::as_string() const {
  RAGD_CHECK(is_string()) << "jinja::Value::as_string on " << type_name(*this);
  return std::get<std::string>(v_);
}

std::span<const Value> Value::items() const {
  RAGD_CHECK(is_list()) << "jinja::Value::items on " << type_name(*this);
  return std::get<std::shared_ptr<const ListData>>(v_)->items;
}

SeqKind Value::seq_kind() const {
  RAGD_CHECK(is_list()) << "jinja::Value::seq_kind on " << type_name(*this);
  return std::get<std::shared_ptr<const ListData>>(v_)->kind;
}

const std::vector<std::pair<std::string, Value>>& Value::entries() const {
  RAGD_CHECK(is_dict()) << "jinja::Value::entries on " << type_name(*this);
  return std::get<std::shared_ptr<const DictData>>(v_)->entries;
}

const std::shared_ptr<Object>& Value::as_object() const {
  RAGD_CHECK(is_object()) << "jinja::Value::as_object on " << type_name(*this);
  return std::get<std::shared_ptr<Object>>(v_);
}

const std::string& Value::undefined_hint() const {
  static const std::string kEmpty;
  RAGD_CHECK(is_undefined()) << "jinja::Value::undefined_hint on " << type_name(*this);
  const auto& h = std::get<Undef>(v_).hint;
  return h ? *h : kEmpty;
}

const Value* Value::get(std::string_view key) const {
  if (!is_dict()) return nullptr;
  return std::get<std::shared_ptr<const DictData>>(v_)->find(key);
}

bool Value::truthy() const {
  switch (type()) {
    case Type::kNone:
    case Type::kUndefined:
      return false;
    case Type::kBool:
      return as_bool();
    case Type::kInt:
      return as_int() != 0;
    case Type::kFloat:
      return as_float() != 0.0;
    case Type::kString:
      return !as_string().empty();
    case Type::kList:
      return !items().empty();
    case Type::kDict:
      return !entries().empty();
    case Type::kObject:
      return as_object()->truthy();
  }
  return false;
}

std::string Value::str() const {
  switch (type()) {
    case Type::kUndefined:
      return {};
    case Type::kString:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (type()) {
    case Type::kNone:
      return "None";
    case Type::kUndefined:
      return "Undefined";
    case Type::kBool:
      return as_bool() ? "True" : "False";
    case Type::kInt:
      return std::to_string(as_int());
    case Type::kFloat:
      return text::float_repr(as_float());
    case Type::kString:
      return text::repr(as_string());
    case Type::kList: {
      std::string body;
      for (const Value& v : items()) {
        if (!body.empty()) body += ", ";
        body += v.repr();
      }
      switch (seq_kind()) {
        case SeqKind::kList:
          return "[" + body + "]";
        case SeqKind::kTuple:
          return "(" + body + (items().size() == 1 ? ",)" : ")");
        case SeqKind::kDictItems:
          return "dict_items([" + body + "])";
        case SeqKind::kDictKeys:
          return "dict_keys([" + body + "])";
        case SeqKind::kDictValues:
          return "dict_values([" + body + "])";
      }
      return body;
    }
    case Type::kDict: {
      std::string s = "{";
      bool first = true;
      for (const auto& [k, v] : entries()) {
        if (!first) s += ", ";
        first = false;
        s += text::repr(k) + ": " + v.repr();
      }
      return s + "}";
    }
    case Type::kObject:
      return as_object()->repr();
  }
  return {};
}

// ---- JSON out: Python's json.dumps ------------------------------------------------------------

namespace {

void json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out.push_back('"');
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x80) {
      if (!ensure_ascii) {
        out.push_back(static_cast<char>(b));
        ++i;
        continue;
      }
      size_t n = 1;
      while (i + n < s.size() && utf8_continuation(s[i + n])) ++n;
      const std::u32string cps = utf8_decode(s.substr(i, n));
      for (char32_t c : cps) {
        if (c >= 0x10000) {
          const char32_t v = c - 0x10000;
          std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                        static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
        } else {
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        }
        out += buf;
      }
      i += n;
      continue;
    }
    switch (b) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (b < 0x20 || (ensure_ascii && b == 0x7F)) {
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(b));
          out += buf;
        } else {
          out.push_back(static_cast<char>(b));
        }
    }
    ++i;
  }
  out.push_back('"');
}

struct JsonWriter {
  const Value::JsonOptions& o;
  std::string item_sep, key_sep;
  std::string out;
  std::string error;

  void newline(int level) {
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *o.indent;
  }

  bool write(const Value& v, int level) {
    switch (v.type()) {
      case Value::Type::kNone:
        out += "null";
        return true;
      case Value::Type::kBool:
        out += v.as_bool() ? "true" : "false";
        return true;
      case Value::Type::kInt:
        out += std::to_string(v.as_int());
        return true;
      case Value::Type::kFloat: {
        const double d = v.as_float();
        if (std::isnan(d)) out += "NaN";
        else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
        else out += text::float_repr(d);
        return true;
      }
      case Value::Type::kString:
        json_string(out, v.as_string(), o.ensure_ascii);
        return true;
      case Value::Type::kList: {
        if (v.items().empty()) {
          out += "[]";
          return true;
        }
        out.push_back('[');
        bool first = true;
        for (const Value& x : v.items()) {
          if (!first) out += item_sep;
          if (o.indent) newline(level + 1);
          first = false;
          if (!write(x, level + 1)) return false;
        }
        if (o.indent) newline(level);
        out.push_back(']');
        return true;
      }
      case Value::Type::kDict: {
        if (v.entries().empty()) {
          out += "{}";
          return true;
        }
        std::vector<const std::pair<std::string, Value>*> es;
        for (const auto& e : v.entries()) es.push_back(&e);
        if (o.sort_keys)
          std::stable_sort(es.begin(), es.end(), [](const auto* a, const auto* b) { return a->first < b->first; });
        out.push_back('{');
        bool first = true;
        for (const auto* e : es) {
          if (!first) out += item_sep;
          if (o.indent) newline(level + 1);
          first = false;
          json_string(out, e->first, o.ensure_ascii);
          out += key_sep;
          if (!write(e->second, level + 1)) return false;
        }
        if (o.indent) newline(level);
        out.push_back('}');
        return true;
      }
      case Value::Type::kUndefined:
      case Value::Type::kObject:
        error = "Object of type " + type_name(v) + " is not JSON serializable";
        return false;
    }
    return false;
  }
};

Result<Value> from_element(simdjson::dom::element e, int depth) {
  if (depth > 512) return Status::InvalidArgument("JSON nested deeper than 512 levels");
  switch (e.type()) {
    case simdjson::dom::element_type::ARRAY: {
      std::vector<Value> items;
      simdjson::dom::array arr;
      if (e.get_array().get(arr) != simdjson::SUCCESS) return Status::InvalidArgument("invalid JSON array");
      for (simdjson::dom::element x : arr) {
        RAGD_ASSIGN_OR_RETURN(Value v, from_element(x, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::list(std::move(items));
    }
    case simdjson::dom::element_type::OBJECT: {
      std::vector<std::pair<std::string, Value>> entries;
      simdjson::dom::object obj;
      if (e.get_object().get(obj) != simdjson::SUCCESS) return Status::InvalidArgument("invalid JSON object");
      for (auto field : obj) {
        RAGD_ASSIGN_OR_RETURN(Value v, from_element(field.value, depth + 1));
        entries.emplace_back(std::string(field.key), std::move(v));
      }
      return Value::dict(std::move(entries));
    }
    case simdjson::dom::element_type::INT64:
      return Value(e.get_int64().value_unsafe());
    case simdjson::dom::element_type::UINT64:
      return Value(static_cast<double>(e.get_uint64().value_unsafe()));
    case simdjson::dom::element_type::DOUBLE:
      return Value(e.get_double().value_unsafe());
    case simdjson::dom::element_type::STRING:
      return Value(std::string(e.get_string().value_unsafe()));
    case simdjson::dom::element_type::BOOL:
      return Value(e.get_bool().value_unsafe());
    case simdjson::dom::element_type::NULL_VALUE:
      return Value();
  }
  return Value();
}

}  // namespace

Result<std::string> Value::to_json(const JsonOptions& o) const {
  JsonWriter w{o, {}, {}, {}, {}};
  w.item_sep = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
  w.key_sep = o.key_separator ? *o.key_separator : ": ";
  if (!w.write(*this, 0)) return Status::InvalidArgument(w.error);
  return std::move(w.out);
}

Result<Value> Value::from_json(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  const simdjson::padded_string padded(json);
  if (auto err = parser.parse(padded).get(doc); err != simdjson::SUCCESS)
    return Status::InvalidArgument(std::string("invalid JSON: ") + simdjson::error_message(err));
  return from_element(doc, 0);
}

}  // namespace ragd::engine::jinja
