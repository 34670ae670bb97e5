#include "tool_call_grammar.h"

#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "json_schema_grammar.h"
#include "ragd/engine/tool_calls.h"

namespace ragd::engine::constraint {

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

struct Tool {
  std::string name, parameters;
};

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

class ToolCallCompiler {
 public:
  ToolCallCompiler(NfaBuilder& b, const ToolCallFormat& f, std::vector<Tool> tools, int ws)
      : b_(b), f_(f), tools_(std::move(tools)), ws_(ws) {}

  // One call of any tool; `skip` leading bytes of its opening (already matched as the trigger).
  Frag any_call(size_t skip) {
    std::vector<Frag> alts;
    for (size_t i = 0; i < tools_.size(); ++i) {
      const Tool& t = tools_[i];
      const std::string head = f_.call_begin + "{\"name\": \"" + t.name + "\", \"" + f_.args_key + "\": ";
      Frag args;
      try {
        args = emit_json_schema(b_, t.parameters.empty() ? R"({"type":"object","properties":{},"additionalProperties":false})" : t.parameters, ws_);
      } catch (const GrammarError& e) {
        throw GrammarError(fmt::format("tools[{}].parameters: {}", i, e.what()));
      }
      alts.push_back(b_.seq({b_.literal(std::string_view(head).substr(skip)), args, b_.literal("}" + f_.call_end)}));
    }
    return b_.alt(alts);
  }

  // The calls, their first `skip` bytes left out.
  Frag calls(size_t skip, int min_calls, int max_calls) {
    size_t first_skip = 0;
    if (!f_.list_begin.empty()) {
      if (skip > f_.list_begin.size()) throw GrammarError("tool_calls: trigger longer than the list opening");
    } else {
      first_skip = skip;
      skip = 0;
    }
    std::vector<Frag> parts;
    parts.push_back(b_.literal(std::string_view(f_.list_begin).substr(skip)));
    parts.push_back(any_call(first_skip));
    const int more_min = std::max(0, min_calls - 1);
    const int more_max = max_calls <= 0 ? -1 : max_calls - 1;
    if (more_max != 0)
      parts.push_back(b_.repeat([&] { return b_.seq({b_.literal(f_.separator), any_call(0)}); }, more_min, more_max));
    parts.push_back(b_.literal(f_.list_end));
    return b_.seq(parts);
  }

  // Free text that never contains `trig`, optionally followed by the calls (which start with it):
  // a KMP automaton over `trig`, whose completing byte leads into the calls.
  Frag text_then_calls(int min_calls, int max_calls) {
    const std::string trig(rtrim(f_.trigger()));
    const std::string_view opening = f_.list_begin.empty() ? std::string_view(f_.call_begin) : std::string_view(f_.list_begin);
    if (opening.substr(0, trig.size()) != trig) throw GrammarError("tool_calls: the format's trigger does not open its calls");
    const Frag after = calls(trig.size(), min_calls, max_calls);
    const size_t m = trig.size();
    std::vector<size_t> fail(m + 1, 0);  // KMP failure function
    for (size_t i = 1, k = 0; i < m; ++i) {
      while (k > 0 && trig[i] != trig[k]) k = fail[k];
      if (trig[i] == trig[k]) ++k;
      fail[i + 1] = k;
    }
    auto delta = [&](size_t j, uint8_t c) {
      while (j > 0 && static_cast<uint8_t>(trig[j]) != c) j = fail[j];
      return static_cast<uint8_t>(trig[j]) == c ? j + 1 : 0;
    };
    Frag f{b_.node(), b_.node()};
    std::vector<int32_t> k(m);
    k[0] = f.in;
    for (size_t j = 1; j < m; ++j) k[j] = b_.node();
    for (size_t j = 0; j < m; ++j) {
      b_.eps(k[j], f.out);  // the text may end anywhere
      auto target = [&](int c) { const size_t nj = delta(j, static_cast<uint8_t>(c)); return nj == m ? after.in : k[nj]; };
      int lo = 0;
      int32_t to = target(0);
      for (int c = 1; c <= 256; ++c) {
        const int32_t t = c < 256 ? target(c) : -1;
        if (t != to) {
          b_.edge(k[j], static_cast<uint8_t>(lo), static_cast<uint8_t>(c - 1), to);
          lo = c;
          to = t;
        }
      }
    }
    b_.eps(after.out, f.out);
    return f;
  }

  // Formats without a trigger: the calls, or text whose first non-blank byte is not '{'.
  Frag calls_or_text(int min_calls, int max_calls) {
    const Frag c = calls(0, min_calls, max_calls);
    const Frag blank = b_.alt({b_.literal(" "), b_.literal("\n"), b_.literal("\t"), b_.literal("\r")});
    std::vector<Frag> first;  // any byte but blanks and '{'
    first.push_back(b_.byte_range(0x00, 0x08));
    first.push_back(b_.byte_range(0x0B, 0x0C));
    first.push_back(b_.byte_range(0x0E, 0x1F));
    first.push_back(b_.byte_range(0x21, 0x7A));
    first.push_back(b_.byte_range(0x7C, 0xFF));
    const Frag text = b_.seq({b_.star(blank), b_.opt(b_.seq({b_.alt(first), b_.star(b_.byte_range(0x00, 0xFF))}))});
    return b_.alt({c, text});
  }

 private:
  NfaBuilder& b_;
  const ToolCallFormat& f_;
  std::vector<Tool> tools_;
  int ws_;
};

}  // namespace

Frag emit_tool_calls(NfaBuilder& b, std::string_view spec_json, int max_whitespace) {
  simdjson::dom::parser p;
  element root;
  if (p.parse(spec_json.data(), spec_json.size()).get(root) || root.type() != element_type::OBJECT)
    throw GrammarError("tool_calls: the spec must be a JSON object");
  std::string_view fmt_name = "hermes";
  if (auto v = root["format"]; !v.error() && v.get_string().get(fmt_name)) throw GrammarError("tool_calls: 'format' must be a string");
  auto format = tool_call_format(fmt_name);
  if (!format.ok()) throw GrammarError("tool_calls: " + format.status().message());
  simdjson::dom::array arr;
  if (root["tools"].get_array().get(arr) || arr.size() == 0) throw GrammarError("tool_calls: 'tools' must be a non-empty array");
  if (arr.size() > static_cast<size_t>(kMaxTools)) throw GrammarError(fmt::format("tool_calls: more than {} tools", kMaxTools));
  std::vector<Tool> tools;
  for (element t : arr) {
    const size_t i = tools.size();
    std::string_view name;
    if (t["name"].get_string().get(name) || !valid_tool_name(name))
      throw GrammarError(fmt::format("tools[{}].name must match [A-Za-z0-9_-]{{1,64}}", i));
    Tool tool{std::string(name), ""};
    if (auto ps = t["parameters"]; !ps.error() && ps.type() != element_type::NULL_VALUE) {
      tool.parameters = simdjson::minify(ps.value_unsafe());
      // Arguments carry the properties the schema lists and no others (OpenAI's strict mode
      // requires additionalProperties false; a tool without it would let a model invent keys).
      simdjson::dom::object po;
      if (!ps.get_object().get(po) && !po["properties"].error() && po["additionalProperties"].error()) {
        tool.parameters.pop_back();
        tool.parameters += po.size() > 0 ? ",\"additionalProperties\":false}" : "\"additionalProperties\":false}";
      }
    }
    tools.push_back(std::move(tool));
  }
  int64_t min_calls = 1, max_calls = 0;
  if (auto v = root["min_calls"]; !v.error() && v.get_int64().get(min_calls)) throw GrammarError("tool_calls: 'min_calls' must be an integer");
  if (auto v = root["max_calls"]; !v.error() && v.get_int64().get(max_calls)) throw GrammarError("tool_calls: 'max_calls' must be an integer");
  if (min_calls < 1 || max_calls < 0 || (max_calls > 0 && max_calls < min_calls))
    throw GrammarError("tool_calls: need 1 <= min_calls <= max_calls (0 = no bound)");
  bool text = false;
  if (auto v = root["text"]; !v.error() && v.get_bool().get(text)) throw GrammarError("tool_calls: 'text' must be a boolean");
  ToolCallCompiler c(b, *format, std::move(tools), max_whitespace);
  const int lo = static_cast<int>(min_calls), hi = static_cast<int>(max_calls);
  if (!text) return c.calls(0, lo, hi);
  return rtrim(format->trigger()).empty() ? c.calls_or_text(lo, hi) : c.text_then_calls(lo, hi);
}

}  // namespace ragd::engine::constraint
