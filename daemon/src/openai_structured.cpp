#include "openai_structured.h"

#include <memory>
#include <string>

#include "ragd/engine/constraint_spec.h"

namespace ragd::daemon {

namespace {

constexpr int64_t kMaxWhitespace = 16;
constexpr size_t kMaxChoices = 4096;

// A schema given as an object, or as its JSON text (guided_json accepts both, as vLLM does).
ApiError schema_text(simdjson::dom::element el, const std::string& field, std::string* out) {
  std::string_view sv;
  if (!el.get_string().get(sv)) {
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    if (p.parse(std::string(sv)).get(doc) || (doc.type() != simdjson::dom::element_type::OBJECT &&
                                              doc.type() != simdjson::dom::element_type::BOOL))
      return bad_request(field, "field '" + field + "' must be a JSON Schema (an object, or its JSON text)");
    *out = simdjson::minify(doc);
    return {};
  }
  if (el.type() != simdjson::dom::element_type::OBJECT && el.type() != simdjson::dom::element_type::BOOL)
    return bad_request(field, "field '" + field + "' must be a JSON Schema (an object)");
  *out = simdjson::minify(el);
  return {};
}

}  // namespace

ApiError parse_structured_output(const Fields& f, pipelines::RunRequest* run) {
  engine::ConstraintSpec spec;
  std::vector<std::string> given;  // the fields that set a constraint (at most one may)
  if (auto rf = f.get("response_format")) {
    simdjson::dom::object o;
    if (rf->get_object().get(o)) return bad_request("response_format", "field 'response_format' must be an object");
    Fields rff(o, "response_format.");
    std::string type;
    if (auto e = rff.str("type", &type, true); e.failed()) return e;
    if (type == "json_object") {
      spec.kind = "json_object";
      spec.origin = "response_format";
      given.push_back("response_format");
    } else if (type == "json_schema") {
      auto js = rff.get("json_schema");
      simdjson::dom::object jo;
      if (!js || js->get_object().get(jo))
        return bad_request("response_format.json_schema", "field 'response_format.json_schema' must be an object");
      Fields jf(jo, "response_format.json_schema.");
      std::string name;
      bool strict = false;
      if (auto e = jf.str("name", &name); e.failed()) return e;
      if (auto e = jf.boolean("strict", &strict); e.failed()) return e;  // the output always follows the schema
      auto schema = jf.get("schema");
      if (!schema) return bad_request("response_format.json_schema.schema", "field 'response_format.json_schema.schema' is required");
      if (auto e = schema_text(*schema, "response_format.json_schema.schema", &spec.source); e.failed()) return e;
      spec.kind = "json_schema";
      spec.origin = "response_format.json_schema.schema";
      given.push_back("response_format");
    } else if (type != "text") {
      return bad_request("response_format.type",
                         "field 'response_format.type' must be text, json_object or json_schema; got '" + clip_input(type) + "'");
    }
  }
  if (auto gj = f.get("guided_json")) {
    if (auto e = schema_text(*gj, "guided_json", &spec.source); e.failed()) return e;
    spec.kind = "json_schema";
    spec.origin = "guided_json";
    given.push_back("guided_json");
  }
  if (f.has("guided_regex")) {
    if (auto e = f.str("guided_regex", &spec.source); e.failed()) return e;
    if (spec.source.empty()) return bad_request("guided_regex", "field 'guided_regex' must not be empty");
    spec.kind = "regex";
    spec.origin = "guided_regex";
    given.push_back("guided_regex");
  }
  if (auto gc = f.get("guided_choice")) {
    simdjson::dom::array arr;
    if (gc->get_array().get(arr) || arr.size() == 0)
      return bad_request("guided_choice", "field 'guided_choice' must be a non-empty array of strings");
    if (arr.size() > kMaxChoices) return bad_request("guided_choice", "field 'guided_choice' has more than 4096 choices");
    for (auto c : arr) {
      std::string_view sv;
      if (c.get_string().get(sv) || sv.empty())
        return bad_request("guided_choice", "field 'guided_choice' must be a non-empty array of non-empty strings");
      spec.choices.emplace_back(sv);
    }
    spec.kind = "choice";
    spec.origin = "guided_choice";
    given.push_back("guided_choice");
  }
  if (given.size() > 1)
    return bad_request(given[1], "only one of response_format (json_object / json_schema), guided_json, guided_regex and "
                                 "guided_choice may be given; got " + given[0] + " and " + given[1]);
  int64_t ws = 0;
  bool has_ws = false;
  if (auto e = f.integer("guided_whitespace_max", &ws, 0, kMaxWhitespace, &has_ws); e.failed()) return e;
  if (given.empty()) return {};
  spec.max_whitespace = static_cast<int>(ws);
  run->sampling.constraint = std::make_shared<const engine::ConstraintSpec>(std::move(spec));
  return {};
}

}  // namespace ragd::daemon
