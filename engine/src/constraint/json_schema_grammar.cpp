#include "json_schema_grammar.h"

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <set>
#include <string>

#include <fmt/format.h>
#include <simdjson.h>

#include "number_grammar.h"
#include "regex_grammar.h"

namespace ragd::engine::constraint {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

const std::set<std::string_view> kAnnotations = {"title", "description", "default", "examples", "$schema", "$id",
                                                 "$comment", "deprecated", "readOnly", "writeOnly"};
const std::set<std::string_view> kHandled = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "uniqueItems",
    "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "format"};

// Format name -> regular expression of the string's content (every match is valid for Python's
// jsonschema format checks: dates with days 01-28, no leading zeros in IPv4 octets).
const std::map<std::string_view, std::string_view> kFormats = {
    {"date", "[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"},
    {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"date-time",
     "[1-9][0-9]{3}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?"
     "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
    {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
    {"email", "[a-z0-9._+-]{1,32}@[a-z0-9-]{1,32}(\\.[a-z0-9-]{1,32}){0,2}\\.[a-z]{2,6}"},
    {"ipv4", "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}"},
};

std::string json_quote(std::string_view s) {
  std::string out = "\"";
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"') out += "\\\"";
    else if (c == '\\') out += "\\\\";
    else if (c < 0x20) out += fmt::format("\\u{:04x}", c);
    else out.push_back(ch);
  }
  return out + "\"";
}

std::string type_of(element e) {
  switch (e.type()) {
    case element_type::ARRAY: return "array";
    case element_type::OBJECT: return "object";
    case element_type::INT64: case element_type::UINT64: return "integer";
    case element_type::DOUBLE: return "number";
    case element_type::STRING: return "string";
    case element_type::BOOL: return "boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "null";
}

bool type_admits(std::string_view declared, std::string_view value_type) {
  return declared == value_type || (declared == "number" && value_type == "integer");
}

class SchemaCompiler {
 public:
  SchemaCompiler(NfaBuilder& b, int max_ws, element root) : b_(b), max_ws_(max_ws), root_(root) {}

  Frag value(element s, const std::string& ptr) {
    if (s.type() == element_type::BOOL) return bool(s) ? any_value(kMaxAnyDepth) : b_.never();
    if (s.type() != element_type::OBJECT) fail(ptr, "a schema must be an object or a boolean");
    object o = s;
    std::vector<std::string_view> keywords;
    for (auto field : o) {
      const std::string_view k = field.key;
      if (kAnnotations.count(k)) continue;
      if (!kHandled.count(k)) fail(ptr, fmt::format("unsupported keyword '{}'", k));
      if (k != "$defs" && k != "definitions") keywords.push_back(k);
    }
    auto only = [&](std::string_view k) {
      for (auto other : keywords)
        if (other != k) fail(ptr, fmt::format("'{}' together with '{}' is not supported", k, other));
    };
    element v;
    if (o["$ref"].get(v) == simdjson::SUCCESS) {
      only("$ref");
      return ref(v, ptr);
    }
    if (o["const"].get(v) == simdjson::SUCCESS) return b_.literal(simdjson::minify(v));
    if (o["enum"].get(v) == simdjson::SUCCESS) return enumeration(o, v, ptr);
    if (o["anyOf"].get(v) == simdjson::SUCCESS) {
      only("anyOf");
      return alternatives(v, ptr + "/anyOf", false);
    }
    if (o["oneOf"].get(v) == simdjson::SUCCESS) {
      only("oneOf");
      return alternatives(v, ptr + "/oneOf", true);
    }
    if (o["allOf"].get(v) == simdjson::SUCCESS) {
      only("allOf");
      simdjson::dom::array a;
      if (v.get(a) != simdjson::SUCCESS || a.size() != 1) fail(ptr + "/allOf", "only allOf with one schema is supported");
      return value(a.at(0).value(), ptr + "/allOf/0");
    }
    std::vector<std::string> types;
    if (o["type"].get(v) == simdjson::SUCCESS) {
      if (v.type() == element_type::STRING) {
        types.emplace_back(std::string_view(v));
      } else if (v.type() == element_type::ARRAY) {
        for (element t : simdjson::dom::array(v)) {
          if (t.type() != element_type::STRING) fail(ptr + "/type", "must be a string or an array of strings");
          types.emplace_back(std::string_view(t));
        }
      } else {
        fail(ptr + "/type", "must be a string or an array of strings");
      }
    } else {
      types = implied_types(o);
      if (types.empty()) return any_value(kMaxAnyDepth);
    }
    std::vector<Frag> alts;
    for (const std::string& t : types) alts.push_back(typed(o, t, ptr));
    return alts.size() == 1 ? alts[0] : b_.alt(alts);
  }

  Frag any_value(int depth) {
    std::vector<Frag> alts = {any_string(), emit_number(b_, {}, false), b_.literal("true"), b_.literal("false"),
                              b_.literal("null")};
    if (depth > 0) {
      alts.push_back(map([&]() { return any_value(depth - 1); }));
      alts.push_back(array([&]() { return any_value(depth - 1); }, 0, -1));
    }
    return b_.alt(alts);
  }

  Frag any_object(int depth) {
    return map([&]() { return any_value(depth - 1); });
  }

 private:
  [[noreturn]] static void fail(const std::string& ptr, const std::string& what) {
    throw GrammarError(fmt::format("schema at '{}': {}", ptr.empty() ? "/" : ptr, what));
  }

  static std::vector<std::string> implied_types(object o) {
    element v;
    for (auto k : {"properties", "additionalProperties", "required"})
      if (o[k].get(v) == simdjson::SUCCESS) return {"object"};
    for (auto k : {"items", "minItems", "maxItems"})
      if (o[k].get(v) == simdjson::SUCCESS) return {"array"};
    for (auto k : {"minLength", "maxLength", "pattern", "format"})
      if (o[k].get(v) == simdjson::SUCCESS) return {"string"};
    for (auto k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
      if (o[k].get(v) == simdjson::SUCCESS) return {"number"};
    return {};
  }

  Frag ws() {
    if (max_ws_ <= 0) return b_.empty();
    return b_.repeat([&]() {
      Frag f{b_.node(), b_.node()};
      b_.edge(f.in, ' ', ' ', f.out);
      b_.edge(f.in, '\n', '\n', f.out);
      b_.edge(f.in, '\t', '\t', f.out);
      return f;
    }, 0, max_ws_);
  }
  Frag punct(std::string_view p) { return b_.seq({ws(), b_.literal(p), ws()}); }

  Frag string_char() {
    // An unescaped character, or an escape: \" \\ \/ \b \f \n \r \t, or \uXXXX outside the surrogates.
    Frag esc = b_.seq({b_.literal("\\"), b_.alt({b_.code_points({{'"', '"'}, {'/', '/'}, {'\\', '\\'}, {'b', 'b'},
                                                                  {'f', 'f'}, {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                                 b_.seq({b_.literal("u"), emit_regex(b_, "([0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2})",
                                                                                    false, "escape")})})});
    return b_.alt({b_.code_points(json_unescaped_chars()), esc});
  }
  Frag any_string() { return b_.seq({b_.literal("\""), b_.star(string_char()), b_.literal("\"")}); }

  // "{" (key ":" value ("," key ":" value)*)? "}" with one copy of key and value.
  Frag map(const std::function<Frag()>& val) {
    Frag open = b_.literal("{");
    Frag close = b_.literal("}");
    const int32_t after_open = b_.node(), after_item = b_.node();
    b_.eps(open.out, after_open);
    Frag lead = ws();
    b_.eps(after_open, lead.in);
    Frag item = b_.seq({any_string(), punct(":"), val()});
    b_.eps(lead.out, item.in);
    b_.eps(lead.out, close.in);  // {}
    b_.eps(item.out, after_item);
    Frag sep = punct(",");
    b_.eps(after_item, sep.in);
    b_.eps(sep.out, item.in);
    Frag tail = ws();
    b_.eps(after_item, tail.in);
    b_.eps(tail.out, close.in);
    return {open.in, close.out};
  }

  Frag array(const std::function<Frag()>& item, int min_items, int max_items) {
    if (max_items == 0) return b_.seq({b_.literal("["), ws(), b_.literal("]")});
    Frag items;
    if (max_items < 0) {
      // max(min, 1) copies of the item, the last one looping back through a comma: one copy of an
      // unbounded item (nested open values stay linear in their depth).
      std::vector<Frag> parts;
      Frag last;
      for (int i = 0; i < std::max(min_items, 1); ++i) {
        if (i > 0) parts.push_back(punct(","));
        last = item();
        parts.push_back(last);
      }
      Frag sep = punct(",");
      b_.eps(last.out, sep.in);
      b_.eps(sep.out, last.in);
      items = b_.seq(parts);
    } else {
      items = b_.seq({item(), b_.repeat([&]() { return b_.seq({punct(","), item()}); }, std::max(min_items - 1, 0), max_items - 1)});
    }
    if (min_items == 0) items = b_.opt(items);
    return b_.seq({b_.literal("["), ws(), items, ws(), b_.literal("]")});
  }

  Frag ref(element v, const std::string& ptr) {
    if (v.type() != element_type::STRING) fail(ptr + "/$ref", "must be a string");
    const std::string target{std::string_view(v)};
    if (target.empty() || target[0] != '#') fail(ptr + "/$ref", fmt::format("only local references ('#...') are supported, not '{}'", target));
    element at = root_;
    std::string rest = target.substr(1);
    if (!rest.empty()) {
      if (rest[0] != '/') fail(ptr + "/$ref", fmt::format("'{}' is not a JSON pointer", target));
      if (at.at_pointer(rest).get(at) != simdjson::SUCCESS) fail(ptr + "/$ref", fmt::format("'{}' does not resolve", target));
    }
    int& active = ref_depth_[target];
    if (active >= kMaxRefDepth) return b_.never();  // recursion bound: this branch is not taken
    ++active;
    Frag f = value(at, rest);
    --active;
    return f;
  }

  Frag enumeration(object o, element values, const std::string& ptr) {
    if (values.type() != element_type::ARRAY) fail(ptr + "/enum", "must be an array");
    std::vector<std::string> types;
    element t;
    if (o["type"].get(t) == simdjson::SUCCESS) {
      if (t.type() == element_type::STRING) types.emplace_back(std::string_view(t));
      else if (t.type() == element_type::ARRAY)
        for (element x : simdjson::dom::array(t))
          if (x.type() == element_type::STRING) types.emplace_back(std::string_view(x));
    }
    std::vector<Frag> alts;
    for (element e : simdjson::dom::array(values)) {
      bool ok = types.empty();
      for (const auto& ty : types) ok = ok || type_admits(ty, type_of(e));
      if (ok) alts.push_back(b_.literal(simdjson::minify(e)));
    }
    if (alts.empty()) fail(ptr + "/enum", "no value (of the schema's type)");
    return b_.alt(alts);
  }

  // What a branch can produce, to tell oneOf branches apart.
  struct Shape {
    std::set<std::string> types;                             // "integer" also counts as "number"
    std::optional<std::set<std::string>> values;             // const / enum: their minified texts
    std::map<std::string, std::set<std::string>> consts;     // required properties with const / enum
  };

  Shape shape(element s, int depth = 0) {
    static const std::set<std::string> kAll = {"object", "array", "string", "number", "integer", "boolean", "null"};
    Shape sh;
    if (depth > 8 || s.type() != element_type::OBJECT) return Shape{kAll, std::nullopt, {}};
    object o = s;
    element v;
    if (o["$ref"].get(v) == simdjson::SUCCESS && v.type() == element_type::STRING) {
      const std::string target{std::string_view(v)};
      element at = root_;
      if (target.size() > 1 && root_.at_pointer(target.substr(1)).get(at) != simdjson::SUCCESS) return Shape{kAll, std::nullopt, {}};
      return shape(at, depth + 1);
    }
    auto add_values = [&](std::vector<element> vals) {
      sh.values.emplace();
      for (element e : vals) {
        sh.values->insert(simdjson::minify(e));
        sh.types.insert(type_of(e));
      }
    };
    if (o["const"].get(v) == simdjson::SUCCESS) {
      add_values({v});
      return sh;
    }
    if (o["enum"].get(v) == simdjson::SUCCESS && v.type() == element_type::ARRAY) {
      std::vector<element> vals;
      for (element e : simdjson::dom::array(v)) vals.push_back(e);
      add_values(vals);
      return sh;
    }
    if (o["type"].get(v) == simdjson::SUCCESS) {
      if (v.type() == element_type::STRING) sh.types.insert(std::string(std::string_view(v)));
      else if (v.type() == element_type::ARRAY)
        for (element t : simdjson::dom::array(v))
          if (t.type() == element_type::STRING) sh.types.insert(std::string(std::string_view(t)));
    } else {
      for (const auto& t : implied_types(o)) sh.types.insert(t);
      if (sh.types.empty()) sh.types = kAll;
    }
    element props, req;
    if (o["properties"].get(props) == simdjson::SUCCESS && o["required"].get(req) == simdjson::SUCCESS &&
        props.type() == element_type::OBJECT && req.type() == element_type::ARRAY) {
      for (element r : simdjson::dom::array(req)) {
        if (r.type() != element_type::STRING) continue;
        element p;
        if (object(props)[std::string_view(r)].get(p) != simdjson::SUCCESS) continue;
        Shape ps = shape(p, depth + 1);
        if (ps.values) sh.consts[std::string(std::string_view(r))] = *ps.values;
      }
    }
    return sh;
  }

  static bool disjoint(const Shape& a, const Shape& b) {
    auto num = [](const std::set<std::string>& t) {
      std::set<std::string> n = t;
      if (n.count("integer")) n.insert("number");
      if (n.count("number")) n.insert("integer");
      return n;
    };
    const auto ta = num(a.types), tb = num(b.types);
    bool types_meet = false;
    for (const auto& t : ta) types_meet = types_meet || tb.count(t);
    if (!types_meet) return true;
    auto sets_disjoint = [](const std::set<std::string>& x, const std::set<std::string>& y) {
      for (const auto& v : x)
        if (y.count(v)) return false;
      return true;
    };
    if (a.values && b.values && sets_disjoint(*a.values, *b.values)) return true;
    const bool objects = a.types == std::set<std::string>{"object"} && b.types == std::set<std::string>{"object"};
    if (objects)
      for (const auto& [k, va] : a.consts) {
        auto it = b.consts.find(k);
        if (it != b.consts.end() && sets_disjoint(va, it->second)) return true;
      }
    return false;
  }

  Frag alternatives(element v, const std::string& ptr, bool exclusive) {
    simdjson::dom::array a;
    if (v.get(a) != simdjson::SUCCESS || a.size() == 0) fail(ptr, "must be a non-empty array of schemas");
    std::vector<element> branches;
    for (element e : a) branches.push_back(e);
    if (exclusive) {
      std::vector<Shape> shapes;
      for (element e : branches) shapes.push_back(shape(e));
      for (size_t i = 0; i < shapes.size(); ++i)
        for (size_t j = i + 1; j < shapes.size(); ++j)
          if (!disjoint(shapes[i], shapes[j]))
            fail(ptr, fmt::format("branches {} and {} may both match (supported: branches that differ in type, in "
                                  "const / enum values, or in a required property's const / enum values; or use anyOf)",
                                  i, j));
    }
    std::vector<Frag> alts;
    for (size_t i = 0; i < branches.size(); ++i) alts.push_back(value(branches[i], ptr + "/" + std::to_string(i)));
    return b_.alt(alts);
  }

  static std::optional<int64_t> int_field(object o, std::string_view k, const std::string& ptr, int64_t max) {
    element v;
    if (o[k].get(v) != simdjson::SUCCESS) return std::nullopt;
    int64_t n;
    if (v.get_int64().get(n) != simdjson::SUCCESS) {
      double d;
      if (v.get_double().get(d) != simdjson::SUCCESS || d != static_cast<double>(static_cast<int64_t>(d)))
        fail(ptr + "/" + std::string(k), "must be a non-negative integer");
      n = static_cast<int64_t>(d);
    }
    if (n < 0) fail(ptr + "/" + std::string(k), "must be a non-negative integer");
    if (n > max) fail(ptr + "/" + std::string(k), fmt::format("above the supported {}", max));
    return n;
  }

  static std::optional<double> num_field(object o, std::string_view k, const std::string& ptr) {
    element v;
    if (o[k].get(v) != simdjson::SUCCESS) return std::nullopt;
    double d;
    if (v.get_double().get(d) == simdjson::SUCCESS) return d;
    int64_t i;
    if (v.get_int64().get(i) == simdjson::SUCCESS) return static_cast<double>(i);
    uint64_t u;
    if (v.get_uint64().get(u) == simdjson::SUCCESS) return static_cast<double>(u);
    fail(ptr + "/" + std::string(k), "must be a number");
  }

  Frag typed(object o, const std::string& type, const std::string& ptr) {
    if (type == "null") return b_.literal("null");
    if (type == "boolean") return b_.alt({b_.literal("true"), b_.literal("false")});
    if (type == "integer" || type == "number") return number(o, type == "integer", ptr);
    if (type == "string") return string(o, ptr);
    if (type == "array") return array_of(o, ptr);
    if (type == "object") return object_of(o, ptr);
    fail(ptr + "/type", fmt::format("unknown type '{}'", type));
  }

  Frag number(object o, bool integer, const std::string& ptr) {
    NumberBounds nb;
    nb.min = num_field(o, "minimum", ptr);
    nb.max = num_field(o, "maximum", ptr);
    element v;
    for (auto [key, bound, excl] : {std::tuple{"exclusiveMinimum", &nb.min, &nb.min_exclusive},
                                    std::tuple{"exclusiveMaximum", &nb.max, &nb.max_exclusive}}) {
      if (o[key].get(v) != simdjson::SUCCESS) continue;
      if (v.type() == element_type::BOOL) {  // draft 4: a flag on minimum / maximum
        *excl = bool(v);
        continue;
      }
      const double x = *num_field(o, key, ptr);
      const bool is_min = std::string_view(key) == "exclusiveMinimum";
      // The tighter of the two bounds wins.
      if (!*bound || (is_min ? x >= **bound : x <= **bound)) *bound = x, *excl = true;
    }
    try {
      return emit_number(b_, nb, integer);
    } catch (const GrammarError& e) {
      fail(ptr, e.what());
    }
  }

  Frag string(object o, const std::string& ptr) {
    element v;
    const auto min_len = int_field(o, "minLength", ptr, kMaxStringLength);
    const auto max_len = int_field(o, "maxLength", ptr, kMaxStringLength);
    const bool has_pattern = o["pattern"].get(v) == simdjson::SUCCESS;
    element f;
    const bool has_format = o["format"].get(f) == simdjson::SUCCESS;
    if ((has_pattern || has_format) && (min_len || max_len))
      fail(ptr, "minLength / maxLength together with pattern or format is not supported");
    if (has_pattern && has_format) fail(ptr, "pattern together with format is not supported");
    Frag body;
    if (has_pattern) {
      if (v.type() != element_type::STRING) fail(ptr + "/pattern", "must be a string");
      body = emit_regex(b_, std::string_view(v), true, "schema at '" + ptr + "/pattern'");
    } else if (has_format) {
      if (f.type() != element_type::STRING) fail(ptr + "/format", "must be a string");
      auto it = kFormats.find(std::string_view(f));
      if (it == kFormats.end()) {
        std::string names;
        for (const auto& [name, re] : kFormats) names += (names.empty() ? "" : ", ") + std::string(name);
        fail(ptr + "/format", fmt::format("unsupported format '{}' (supported: {})", std::string_view(f), names));
      }
      body = emit_regex(b_, it->second, true, "format");
    } else {
      const int lo = static_cast<int>(min_len.value_or(0));
      const int hi = max_len ? static_cast<int>(*max_len) : -1;
      if (hi >= 0 && hi < lo) fail(ptr, "maxLength below minLength");
      body = b_.repeat([&]() { return string_char(); }, lo, hi);
    }
    return b_.seq({b_.literal("\""), body, b_.literal("\"")});
  }

  Frag array_of(object o, const std::string& ptr) {
    element v;
    if (o["uniqueItems"].get(v) == simdjson::SUCCESS && !(v.type() == element_type::BOOL && !bool(v)))
      fail(ptr + "/uniqueItems", "unsupported keyword 'uniqueItems' (only false)");
    const int lo = static_cast<int>(int_field(o, "minItems", ptr, kMaxItems).value_or(0));
    const auto max = int_field(o, "maxItems", ptr, kMaxItems);
    const int hi = max ? static_cast<int>(*max) : -1;
    if (hi >= 0 && hi < lo) fail(ptr, "maxItems below minItems");
    element items;
    const bool has_items = o["items"].get(items) == simdjson::SUCCESS;
    if (has_items && items.type() == element_type::ARRAY) fail(ptr + "/items", "tuple items (an array) are not supported");
    auto item = [&]() { return has_items ? value(items, ptr + "/items") : any_value(kMaxAnyDepth - 1); };
    return array(item, lo, hi);
  }

  Frag object_of(object o, const std::string& ptr) {
    element v;
    // additionalProperties: absent / true = any, false = none, a schema.
    std::optional<element> extra;
    bool extra_allowed = true;
    if (o["additionalProperties"].get(v) == simdjson::SUCCESS) {
      if (v.type() == element_type::BOOL) extra_allowed = bool(v);
      else extra = v;
    }
    std::vector<std::pair<std::string, std::optional<element>>> props;  // name, schema (none: any value)
    std::set<std::string> listed;
    if (o["properties"].get(v) == simdjson::SUCCESS) {
      if (v.type() != element_type::OBJECT) fail(ptr + "/properties", "must be an object");
      for (auto field : object(v)) {
        props.emplace_back(std::string(field.key), field.value);
        listed.insert(std::string(field.key));
      }
    }
    std::set<std::string> required;
    if (o["required"].get(v) == simdjson::SUCCESS) {
      if (v.type() != element_type::ARRAY) fail(ptr + "/required", "must be an array of strings");
      for (element r : simdjson::dom::array(v)) {
        if (r.type() != element_type::STRING) fail(ptr + "/required", "must be an array of strings");
        const std::string name{std::string_view(r)};
        required.insert(name);
        if (!listed.count(name)) {
          if (!extra_allowed) fail(ptr + "/required", fmt::format("'{}' is required but additionalProperties is false", name));
          props.emplace_back(name, extra);
          listed.insert(name);
        }
      }
    }
    if (props.empty()) {
      if (!extra_allowed) return b_.seq({b_.literal("{"), ws(), b_.literal("}")});
      if (extra) {
        element e = *extra;
        return map([&]() { return value(e, ptr + "/additionalProperties"); });
      }
      return any_object(kMaxAnyDepth);
    }
    // Properties in order; at[i][s]: before property i, s = whether one was written (a comma is due).
    const size_t n = props.size();
    std::vector<std::array<int32_t, 2>> at(n + 1);
    for (auto& a : at) a = {b_.node(), b_.node()};
    for (size_t i = 0; i < n; ++i) {
      const auto& [name, schema] = props[i];
      const std::string p = ptr + "/properties/" + name;
      Frag item = b_.seq({b_.literal(json_quote(name)), punct(":"),
                          schema ? value(*schema, p) : any_value(kMaxAnyDepth - 1)});
      b_.eps(at[i][0], item.in);
      Frag comma = punct(",");
      b_.eps(at[i][1], comma.in);
      b_.eps(comma.out, item.in);
      b_.eps(item.out, at[i + 1][1]);
      if (!required.count(name)) {
        b_.eps(at[i][0], at[i + 1][0]);
        b_.eps(at[i][1], at[i + 1][1]);
      }
    }
    Frag open = b_.seq({b_.literal("{"), ws()});
    Frag close = b_.seq({ws(), b_.literal("}")});
    b_.eps(open.out, at[0][0]);
    b_.eps(at[n][0], close.in);
    b_.eps(at[n][1], close.in);
    return {open.in, close.out};
  }

  NfaBuilder& b_;
  int max_ws_;
  element root_;
  std::map<std::string, int> ref_depth_;  // expansions of each $ref target on the current path
};

}  // namespace

Frag emit_json_schema(NfaBuilder& b, std::string_view schema_json, int max_whitespace) {
  simdjson::dom::parser parser;
  element root;
  const simdjson::padded_string padded(schema_json);
  if (auto err = parser.parse(padded).get(root); err != simdjson::SUCCESS)
    throw GrammarError(fmt::format("schema is not valid JSON: {}", simdjson::error_message(err)));
  SchemaCompiler c(b, max_whitespace, root);
  return c.value(root, "");
}

Frag emit_json_object(NfaBuilder& b, int max_whitespace) {
  simdjson::dom::parser parser;
  element root;
  const simdjson::padded_string padded(std::string_view("{}"));
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) throw GrammarError("internal: {} did not parse");
  SchemaCompiler c(b, max_whitespace, root);
  return c.any_object(kMaxAnyDepth);
}

}  // namespace ragd::engine::constraint
