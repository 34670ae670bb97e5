// Tool calls (tool_calls.h, the "tool_calls" grammar kind): every format renders calls that its
// parser reads back; the streaming parser, fed the same answer cut at random points, gives the
// same content and calls as the whole-answer parser; the grammar accepts the rendered calls and
// refuses unknown tools, arguments outside their schema, trailing text and (with free text) text
// that contains the trigger without a call; the matcher's random walks over a random vocabulary
// always end in an answer that parses; built-in templates fold tools into the conversation.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ragd/engine/constraint_cache.h"
#include "ragd/engine/constraint_matcher.h"
#include "ragd/engine/grammar.h"
#include "ragd/engine/model_chat_template.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/engine/tool_calls.h"

namespace ragd::engine {
namespace {

const char* kWeather = R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city"],"additionalProperties":false})";
const char* kUnits = R"({"type":"object","properties":{"unit":{"enum":["c","f"]}},"required":["unit"],"additionalProperties":false})";

std::string spec_json(const std::string& format, int min_calls, int max_calls, bool text) {
  return R"({"format":")" + format + R"(","tools":[{"name":"get_weather","parameters":)" + kWeather +
         R"(},{"name":"set_units","parameters":)" + kUnits + R"(},{"name":"ping"}],"min_calls":)" + std::to_string(min_calls) +
         R"(,"max_calls":)" + std::to_string(max_calls) + R"(,"text":)" + (text ? "true" : "false") + "}";
}

std::shared_ptr<const Grammar> compile(const std::string& src) {
  auto g = compile_grammar(ConstraintSpec{"tool_calls", src, {}, 0, ""});
  EXPECT_TRUE(g.ok()) << src << ": " << g.status().to_string();
  return g.ok() ? *g : nullptr;
}

std::vector<ToolCall> sample_calls(std::mt19937_64& rng, size_t n) {
  static const char* kArgs[][2] = {{"get_weather", R"({"city":"Paris"})"},
                                   {"get_weather", R"({"city":"a \"quoted\" }","days":3})"},
                                   {"set_units", R"({"unit":"f"})"},
                                   {"ping", "{}"}};
  std::vector<ToolCall> v;
  for (size_t i = 0; i < n; ++i) {
    const auto& a = kArgs[rng() % 4];
    v.push_back({"", a[0], a[1]});
  }
  return v;
}

TEST(ToolCalls, FormatsRoundTrip) {
  std::mt19937_64 rng(7);
  for (const std::string& name : tool_call_format_names()) {
    const ToolCallFormat f = *tool_call_format(name);
    for (size_t n : {1u, 2u, 3u}) {
      const auto calls = sample_calls(rng, n);
      const std::string prefix = f.trigger().empty() ? "" : "Let me look that up.\n";
      const ToolOutput out = parse_tool_calls(f, prefix + f.render_calls(calls));
      ASSERT_EQ(out.calls.size(), n) << name << ": " << f.render_calls(calls);
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(out.calls[i].name, calls[i].name);
        EXPECT_EQ(out.calls[i].arguments, calls[i].arguments);
      }
      EXPECT_EQ(out.content, f.trigger().empty() ? "" : "Let me look that up.");
    }
    // Text without calls, and calls cut short: all content.
    EXPECT_TRUE(parse_tool_calls(f, "Sunny, 21 degrees.").calls.empty());
    const std::string cut = f.render_calls(sample_calls(rng, 1));
    const ToolOutput half = parse_tool_calls(f, cut.substr(0, cut.size() - 3));
    EXPECT_TRUE(half.calls.empty()) << name;
    EXPECT_EQ(half.content, cut.substr(0, cut.size() - 3));
  }
  EXPECT_FALSE(tool_call_format("pythonic").ok());
}

TEST(ToolCalls, StreamMatchesWholeParseAtRandomCuts) {
  std::mt19937_64 rng(11);
  for (const std::string& name : tool_call_format_names()) {
    const ToolCallFormat f = *tool_call_format(name);
    for (int trial = 0; trial < 200; ++trial) {
      std::string text;
      const int shape = trial % 4;
      bool cut = false;
      if (shape == 0) text = "No calls here, just <tool an answer [TOOL] {x}.";
      else if (shape == 1) text = f.render_calls(sample_calls(rng, 1 + rng() % 3));
      else if (shape == 2 && !f.trigger().empty()) text = "Checking \n\n" + f.render_calls(sample_calls(rng, 1 + rng() % 3));
      else text = f.render_calls(sample_calls(rng, 2)).substr(0, 20), cut = true;
      const ToolOutput whole = parse_tool_calls(f, text);
      ToolCallStream s(f);
      std::string content;
      std::vector<ToolCall> calls;
      auto take = [&](const ToolCallStream::Delta& d) {
        content += d.content;
        for (const auto& c : d.calls) {
          if (c.first) {
            ASSERT_EQ(c.index, calls.size());
            calls.push_back({"", c.name, ""});
          }
          ASSERT_LT(c.index, calls.size());
          calls[c.index].arguments += c.arguments;
        }
      };
      size_t at = 0;
      while (at < text.size()) {
        const size_t n = std::min(text.size() - at, size_t{1} + rng() % 6);
        take(s.feed(text.substr(at, n)));
        at += n;
      }
      take(s.finish());
      if (whole.calls.empty() && !calls.empty()) {
        // An answer cut inside its calls: their names went out as soon as they were known (a
        // stream cannot take them back); the text before them is the content.
        EXPECT_TRUE(cut) << text;
        EXPECT_TRUE(content.empty()) << content;
        continue;
      }
      ASSERT_EQ(calls.size(), whole.calls.size()) << name << ": " << text;
      for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(calls[i].name, whole.calls[i].name);
        EXPECT_EQ(calls[i].arguments, whole.calls[i].arguments) << text;
      }
      EXPECT_EQ(content, whole.content) << name << ": " << text;
    }
  }
}

TEST(ToolCalls, GrammarAcceptsCallsAndRefusesTheRest) {
  for (const std::string& name : tool_call_format_names()) {
    const ToolCallFormat f = *tool_call_format(name);
    const auto one = compile(spec_json(name, 1, 1, false));
    const auto many = compile(spec_json(name, 1, 0, false));
    const auto text = compile(spec_json(name, 1, 0, true));
    ASSERT_TRUE(one && many && text);
    const std::string a = f.render_calls({{"", "get_weather", R"({"city":"Oslo","days":2})"}});
    const std::string b = f.render_calls({{"", "get_weather", R"({"city":"Oslo"})"}, {"", "ping", "{}"}, {"", "set_units", R"({"unit":"c"})"}});
    EXPECT_TRUE(one->accepts(a)) << a;
    EXPECT_FALSE(one->accepts(b)) << "one call at most";
    EXPECT_TRUE(many->accepts(b)) << b;
    EXPECT_TRUE(text->accepts(b));
    EXPECT_FALSE(one->accepts(f.render_calls({{"", "get_time", "{}"}}))) << "unknown tool";
    EXPECT_FALSE(one->accepts(f.render_calls({{"", "get_weather", R"({"days":2})"}}))) << "required property missing";
    EXPECT_FALSE(one->accepts(f.render_calls({{"", "get_weather", R"({"city":"Oslo","days":9})"}}))) << "days > 7";
    EXPECT_FALSE(one->accepts(f.render_calls({{"", "set_units", R"({"unit":"k"})"}}))) << "enum";
    EXPECT_FALSE(one->accepts(a + " thanks")) << "text after the calls";
    EXPECT_FALSE(one->accepts("Hello")) << "required: no text";
    EXPECT_TRUE(text->accepts("Hello, no function needed."));
    EXPECT_TRUE(text->accepts(""));
    if (!f.trigger().empty()) {
      EXPECT_TRUE(text->accepts("Let me check. " + b));
      const std::string trig = f.trigger().substr(0, f.trigger().find('\n'));
      EXPECT_FALSE(text->accepts("I would write " + trig + " here")) << "the trigger opens calls";
      EXPECT_TRUE(text->accepts_prefix("a " + trig.substr(0, trig.size() - 1)));
    } else {
      EXPECT_FALSE(text->accepts("  {not a call}"));
      EXPECT_TRUE(text->accepts("Sure: {x}"));
    }
  }
  EXPECT_FALSE(compile_grammar({"tool_calls", R"({"format":"hermes","tools":[]})", {}, 0}).ok());
  EXPECT_FALSE(compile_grammar({"tool_calls", R"({"format":"hermes","tools":[{"name":"a b"}]})", {}, 0}).ok());
  EXPECT_FALSE(compile_grammar({"tool_calls", R"({"format":"xml","tools":[{"name":"a"}]})", {}, 0}).ok());
  auto bad = compile_grammar({"tool_calls", R"({"tools":[{"name":"a","parameters":{"type":"object","not":{}}}]})", {}, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tools[0].parameters"), std::string::npos) << bad.status().message();
}

// Random walks of the matcher over a random byte vocabulary: every finished answer parses, with
// calls of known tools whenever the walk chose calls.
TEST(ToolCalls, MatcherWalksAlwaysParse) {
  std::mt19937_64 rng(5);
  std::vector<std::string> bytes = {"\n"};
  for (char c = 0x20; c < 0x7F; ++c) bytes.emplace_back(1, c);  // every answer can be spelled
  const std::string alphabet = "abc {}[]\":,0123456789_-<>/\n;TOLSCAplngetwhrcyiud";
  for (int i = 0; i < 301; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    bytes.push_back(t);
  }
  for (const std::string& name : tool_call_format_names()) {
    const ToolCallFormat f = *tool_call_format(name);
    // The format's literals as tokens too, so that walks can reach them in a few steps.
    std::vector<std::string> v = bytes;
    for (const std::string& lit : {f.call_begin, f.call_end, f.list_begin, f.list_end, f.separator, std::string("get_weather"),
                                   std::string("set_units"), std::string("ping"), std::string("{\"name\": \""),
                                   "\", \"" + f.args_key + "\": "})
      if (!lit.empty()) v.push_back(lit);
    const int32_t eos = static_cast<int32_t>(v.size());
    v.push_back("");
    ConstraintCache cache(TokenVocabulary::from_bytes(v));
    for (bool text : {false, true}) {
      auto c = cache.get({"tool_calls", spec_json(name, 1, 3, text), {}, 0});
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      int with_calls = 0;
      for (int walk = 0; walk < 40; ++walk) {
        ConstraintMatcher m(*c, {eos});
        std::string out;
        for (int step = 0; step < 1500 && !m.complete(); ++step) {
          if (m.accepting() && rng() % 20 == 0) break;  // the model ends its answer
          const TokenMask mask = m.mask();
          std::vector<int32_t> allowed;
          for (int32_t id = 0; id < static_cast<int32_t>(v.size()); ++id)
            if (mask.allows(id)) allowed.push_back(id);
          ASSERT_FALSE(allowed.empty());
          int32_t pick = allowed[rng() % allowed.size()];
          // Prefer longer tokens half of the time, so that walks finish calls.
          if (rng() % 2) for (int32_t id : allowed) if (v[id].size() > v[pick].size() && id != eos) pick = id;
          if (pick == eos) break;
          ASSERT_TRUE(m.accept(pick));
          out += v[pick];
        }
        if (!m.accepting()) {
          ADD_FAILURE() << name << " " << text << " walk ended outside (nfa accepts: " << (*c)->grammar().accepts(out)
                        << ", prefix " << (*c)->grammar().accepts_prefix(out) << "): " << out;
          continue;
        }
        const ToolOutput p = parse_tool_calls(f, out);
        if (!text) ASSERT_FALSE(p.calls.empty()) << name << ": " << out;
        with_calls += !p.calls.empty();
        for (const auto& call : p.calls) EXPECT_TRUE(call.name == "get_weather" || call.name == "set_units" || call.name == "ping");
        if (text && p.calls.empty()) EXPECT_EQ(p.content, out);
      }
      if (!text) EXPECT_GT(with_calls, 0) << name;
    }
  }
}

TEST(ToolCalls, BuiltinTemplatesFoldTools) {
  const ToolCallFormat f = *tool_call_format("hermes");
  std::vector<ChatMessage> msgs = {{"user", "Weather in Oslo?"},
                                   {"assistant", "", {{"call_1", "get_weather", R"({"city":"Oslo"})"}}},
                                   {"tool", "{\"temp\": 3}", {}, "call_1", "get_weather"},
                                   {"tool", "{\"wind\": 9}", {}, "call_2", ""}};
  const std::vector<ToolDef> tools = {{"get_weather", "Weather \"now\"", kWeather}};
  const auto folded = fold_tools_into_messages(f, msgs, tools);
  ASSERT_EQ(folded.size(), 4u);  // system guide, user, assistant, one user turn of both results
  EXPECT_EQ(folded[0].role, "system");
  EXPECT_NE(folded[0].content.find("\"name\": \"get_weather\""), std::string::npos);
  EXPECT_NE(folded[0].content.find("Weather \\\"now\\\""), std::string::npos);
  EXPECT_EQ(folded[2].content, f.render_calls(msgs[1].tool_calls));
  EXPECT_EQ(folded[3].role, "user");
  EXPECT_EQ(folded[3].content, "<tool_response>\n{\"temp\": 3}\n</tool_response>\n<tool_response>\n{\"wind\": 9}\n</tool_response>");
  // The model's own template sees the calls as transformers passes them.
  auto t = ModelChatTemplate::from_source(
      "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name }}{{ c.function.arguments | tojson }}{% endfor %}"
      "{% else %}{{ m.content }}{% endif %}{% if m.tool_call_id %}({{ m.tool_call_id }}){% endif %}|{% endfor %}"
      "{% if tools %}{{ tools[0].function.name }}{% endif %}",
      jinja::Value::dict({}));
  ASSERT_TRUE(t.ok());
  auto r = (*t)->render(msgs, false, tools);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(*r, "user:Weather in Oslo?|assistant:get_weather{\"city\": \"Oslo\"}|tool:{\"temp\": 3}(call_1)|tool:{\"wind\": 9}(call_2)|get_weather");
  EXPECT_EQ((*t)->tool_call_format().name, "hermes");
  EXPECT_EQ(detect_tool_call_format("{{ '[TOOL_CALLS]' }}", "hermes").name, "mistral");
  EXPECT_EQ(detect_tool_call_format("<|python_tag|> {\"name\": x, \"parameters\": y}", "hermes").name, "llama3_json");
}

}  // namespace
}  // namespace ragd::engine
