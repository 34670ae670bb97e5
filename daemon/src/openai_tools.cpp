#include "openai_tools.h"

namespace ragd::daemon {

namespace {

constexpr size_t kMaxTools = 128;

// A JSON Schema given as an object (OpenAI's `parameters`), minified.
ApiError schema_object(simdjson::dom::element el, const std::string& field, std::string* out) {
  if (el.type() != simdjson::dom::element_type::OBJECT) return bad_request(field, "field '" + field + "' must be a JSON Schema object");
  *out = simdjson::minify(el);
  return {};
}

ApiError object_at(simdjson::dom::element el, const std::string& where, simdjson::dom::object* out) {
  if (el.get_object().get(*out)) return bad_request(where, "field '" + where + "' must be an object");
  return {};
}

}  // namespace

ApiError parse_tools(const Fields& f, pipelines::RunRequest* run) {
  if (auto tools = f.get("tools")) {
    simdjson::dom::array arr;
    if (tools->get_array().get(arr)) return bad_request("tools", "field 'tools' must be an array of {type: \"function\", function: {...}}");
    if (arr.size() > kMaxTools) return bad_request("tools", "field 'tools' has more than " + std::to_string(kMaxTools) + " tools");
    if (arr.size() == 0) return bad_request("tools", "field 'tools' must not be empty (leave it out for no tools)");  // as OpenAI
    size_t i = 0;
    for (auto t : arr) {
      const std::string where = "tools[" + std::to_string(i++) + "]";
      simdjson::dom::object to;
      if (auto e = object_at(t, where, &to); e.failed()) return e;
      Fields tf(to, where + ".");
      std::string type;
      if (auto e = tf.str("type", &type, true); e.failed()) return e;
      if (type != "function") return bad_request(where + ".type", "field '" + where + ".type' must be \"function\"; got '" + clip_input(type) + "'");
      if (auto e = tf.only({"type", "function"}); e.failed()) return e;
      auto fn = tf.get("function");
      if (!fn) return bad_request(where + ".function", "field '" + where + ".function' is required");
      simdjson::dom::object fo;
      if (auto e = object_at(*fn, where + ".function", &fo); e.failed()) return e;
      Fields ff(fo, where + ".function.");
      if (auto e = ff.only({"name", "description", "parameters", "strict"}); e.failed()) return e;
      engine::ToolDef def;
      if (auto e = ff.str("name", &def.name, true); e.failed()) return e;
      if (auto e = ff.str("description", &def.description); e.failed()) return e;
      bool strict = false;  // arguments always follow the schema
      if (auto e = ff.boolean("strict", &strict); e.failed()) return e;
      if (auto p = ff.get("parameters"))
        if (auto e = schema_object(*p, where + ".function.parameters", &def.parameters); e.failed()) return e;
      run->tools.push_back(std::move(def));
    }
  }
  using Mode = pipelines::ToolChoice::Mode;
  if (auto tc = f.get("tool_choice")) {
    std::string_view sv;
    if (!tc->get_string().get(sv)) {
      if (sv == "auto") run->tool_choice.mode = Mode::kAuto;
      else if (sv == "none") run->tool_choice.mode = Mode::kNone;
      else if (sv == "required") run->tool_choice.mode = Mode::kRequired;
      else
        return bad_request("tool_choice", "field 'tool_choice' must be auto, none, required or {type: \"function\", function: {name}}; got '" +
                                              clip_input(sv) + "'");
    } else {
      simdjson::dom::object o;
      if (auto e = object_at(*tc, "tool_choice", &o); e.failed()) return e;
      Fields cf(o, "tool_choice.");
      std::string type;
      if (auto e = cf.str("type", &type, true); e.failed()) return e;
      if (type != "function") return bad_request("tool_choice.type", "field 'tool_choice.type' must be \"function\"; got '" + clip_input(type) + "'");
      auto fn = cf.get("function");
      simdjson::dom::object fo;
      if (!fn) return bad_request("tool_choice.function", "field 'tool_choice.function' is required");
      if (auto e = object_at(*fn, "tool_choice.function", &fo); e.failed()) return e;
      if (auto e = Fields(fo, "tool_choice.function.").str("name", &run->tool_choice.function, true); e.failed()) return e;
      run->tool_choice.mode = Mode::kFunction;
    }
    if (run->tools.empty() && run->tool_choice.mode != Mode::kNone && run->tool_choice.mode != Mode::kAuto)
      return bad_request("tool_choice", "field 'tool_choice' asks for a tool call, but the request has no tools");
  }
  if (run->tool_choice.mode == Mode::kFunction) {
    bool found = false;
    for (const auto& t : run->tools) found |= t.name == run->tool_choice.function;
    if (!found)
      return bad_request("tool_choice", "field 'tool_choice' names function '" + clip_input(run->tool_choice.function) +
                                            "', which is not among the tools");
  }
  if (auto e = f.boolean("parallel_tool_calls", &run->parallel_tool_calls); e.failed()) return e;
  return {};
}

ApiError parse_message_tool_calls(simdjson::dom::element el, const std::string& where, std::vector<engine::ToolCall>* out) {
  simdjson::dom::array arr;
  if (el.get_array().get(arr)) return bad_request(where, "field '" + where + "' must be an array");
  size_t i = 0;
  for (auto c : arr) {
    const std::string w = where + "[" + std::to_string(i++) + "]";
    simdjson::dom::object co;
    if (auto e = object_at(c, w, &co); e.failed()) return e;
    Fields cf(co, w + ".");
    engine::ToolCall call;
    if (auto e = cf.str("id", &call.id); e.failed()) return e;
    std::string type = "function";
    if (auto e = cf.str("type", &type); e.failed()) return e;
    if (type != "function") return bad_request(w + ".type", "field '" + w + ".type' must be \"function\"");
    auto fn = cf.get("function");
    if (!fn) return bad_request(w + ".function", "field '" + w + ".function' is required");
    simdjson::dom::object fo;
    if (auto e = object_at(*fn, w + ".function", &fo); e.failed()) return e;
    Fields ff(fo, w + ".function.");
    if (auto e = ff.str("name", &call.name, true); e.failed()) return e;
    if (auto e = ff.str("arguments", &call.arguments, true); e.failed()) return e;
    out->push_back(std::move(call));
  }
  return {};
}

std::shared_ptr<OaiToolState> make_tool_state(const pipelines::RunRequest& run, engine::ToolCallFormat format,
                                              const std::string& id_prefix) {
  if (run.tools.empty() || run.tool_choice.mode == pipelines::ToolChoice::Mode::kNone) return nullptr;
  auto t = std::make_shared<OaiToolState>();
  t->named = run.tool_choice.mode == pipelines::ToolChoice::Mode::kFunction;
  t->id_prefix = id_prefix;
  t->stream = std::make_unique<engine::ToolCallStream>(format);
  t->format = std::move(format);
  return t;
}

void write_tool_calls(JsonWriter& w, const std::vector<engine::ToolCall>& calls, const std::string& id_prefix) {
  w.begin_array();
  for (size_t i = 0; i < calls.size(); ++i) {
    w.begin_object().key("id").value(id_prefix + std::to_string(i)).key("type").value("function");
    w.key("function").begin_object().key("name").value(calls[i].name).key("arguments").value(calls[i].arguments).end_object();
    w.end_object();
  }
  w.end_array();
}

void write_tool_call_deltas(JsonWriter& w, const std::vector<engine::ToolCallStream::Delta::Call>& calls,
                            const std::string& id_prefix) {
  w.begin_array();
  for (const auto& c : calls) {
    w.begin_object().key("index").value(static_cast<uint64_t>(c.index));
    if (c.first) w.key("id").value(id_prefix + std::to_string(c.index)).key("type").value("function");
    w.key("function").begin_object();
    if (c.first) w.key("name").value(c.name);
    w.key("arguments").value(c.arguments);
    w.end_object().end_object();
  }
  w.end_array();
}

std::string tool_finish_reason(const OaiToolState& t, size_t n, const std::string& finish) {
  if (n == 0 || finish != "stop" || t.named) return finish;
  return "tool_calls";
}

}  // namespace ragd::daemon
