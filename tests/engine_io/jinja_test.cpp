// Unit tests of the Jinja interpreter that need no oracle: constructs outside the subset fail at
// compile time naming the line and the construct, malformed templates give clear errors, runtime
// failures carry the message and the line, limits hold, values convert, and one compiled template
// renders concurrently from many threads.
#include <gtest/gtest.h>

#include <thread>

#include "ragd/engine/jinja.h"

namespace ragd::engine::jinja {
namespace {

std::string compile_error(std::string_view src) {
  auto t = Template::compile(src, "t.jinja");
  return t.ok() ? std::string("(compiled)") : t.status().message();
}

Result<std::string> render(std::string_view src, const Value& ctx = Value::dict({}), const RenderOptions& o = {}) {
  auto t = Template::compile(src, "t.jinja");
  if (!t.ok()) return t.status();
  return (*t)->render(ctx, o);
}

std::string render_error(std::string_view src, const Value& ctx = Value::dict({}), const RenderOptions& o = {}) {
  auto r = render(src, ctx, o);
  return r.ok() ? "(rendered: " + *r + ")" : r.status().message();
}

TEST(Jinja, RendersBasics) {
  EXPECT_EQ(*render("{{ 1 + 2 }}"), "3");
  EXPECT_EQ(*render("{% for m in ms %}{{ m.role }};{% endfor %}",
                    Value::dict({{"ms", Value::list({Value::dict({{"role", "user"}}), Value::dict({{"role", "bot"}})})}})),
            "user;bot;");
  EXPECT_EQ(*render("a\n"), "a");  // keep_trailing_newline = False
  EXPECT_EQ(*render("{% if x %}\n  yes\n{% endif %}\n", Value::dict({{"x", true}})), "  yes\n");
}

TEST(Jinja, UnsupportedConstructsFailAtCompileNamingLineAndConstruct) {
  EXPECT_EQ(compile_error("a\nb\n{% include 'other.jinja' %}"), "t.jinja: line 3: unsupported construct '{% include %}'");
  EXPECT_EQ(compile_error("{% extends 'base' %}"), "t.jinja: line 1: unsupported construct '{% extends %}'");
  EXPECT_EQ(compile_error("{% import 'm' as m %}"), "t.jinja: line 1: unsupported construct '{% import %}'");
  EXPECT_EQ(compile_error("{% from 'm' import x %}"), "t.jinja: line 1: unsupported construct '{% from %}'");
  EXPECT_EQ(compile_error("\n{% block body %}{% endblock %}"), "t.jinja: line 2: unsupported construct '{% block %}'");
  EXPECT_EQ(compile_error("{% macro m() %}{{ caller() }}{% endmacro %}"),
            "t.jinja: line 1: unsupported construct global 'caller'");
  EXPECT_EQ(compile_error("{% call m() %}x{% endcall %}"), "t.jinja: line 1: unsupported construct '{% call %}'");
  EXPECT_EQ(compile_error("{% autoescape true %}{% endautoescape %}"),
            "t.jinja: line 1: unsupported construct '{% autoescape %}'");
  EXPECT_EQ(compile_error("{% do x.append(1) %}"), "t.jinja: line 1: unsupported construct '{% do %}'");
  EXPECT_EQ(compile_error("\n\n{{ x | format('a') }}"), "t.jinja: line 3: unsupported construct filter 'format'");
  EXPECT_EQ(compile_error("{{ x is prime }}"), "t.jinja: line 1: unsupported construct test 'prime'");
  EXPECT_EQ(compile_error("{% for x in xs recursive %}{% endfor %}"),
            "t.jinja: line 1: unsupported construct 'recursive' loop");
  EXPECT_EQ(compile_error("{{ f(*args) }}"), "t.jinja: line 1: unsupported construct '*args' / '**kwargs' in a call");
  EXPECT_EQ(compile_error("{% set c = cycler('a', 'b') %}"), "t.jinja: line 1: unsupported construct global 'cycler'");
  EXPECT_EQ(compile_error("{{ '\\N{BULLET}' }}"),
            "t.jinja: line 1: unsupported construct: \\N{...} escape in a string literal");
  EXPECT_EQ(compile_error("{% set x.y.z = 1 %}"), "t.jinja: line 1: expected '%}', got '.'");
  EXPECT_EQ(compile_error("{% set x[0] = 1 %}"), "t.jinja: line 1: expected '%}', got '['");
  EXPECT_EQ(compile_error("{% for a, (b, c) in z %}{% endfor %}"),
            "t.jinja: line 1: unsupported construct assignment target (only names, tuples of names and namespace "
            "attributes)");
}

TEST(Jinja, MalformedTemplatesGiveClearErrors) {
  EXPECT_EQ(compile_error("{% frobnicate %}"), "t.jinja: line 1: unknown tag 'frobnicate'");
  EXPECT_EQ(compile_error("{% endfor %}"), "t.jinja: line 1: unknown tag 'endfor'");
  EXPECT_EQ(compile_error("{% if x %}\nyes\n"),
            "t.jinja: line 2: unexpected end of template: looking for 'elif' or 'else' or 'endif' to close 'if' (line 1)");
  EXPECT_EQ(compile_error("{% for x in y %}\n{% endif %}"),
            "t.jinja: line 2: unknown tag 'endif', looking for 'endfor' or 'else' to close 'for' (line 1)");
  EXPECT_EQ(compile_error("{{ 1 + }}"), "t.jinja: line 1: unexpected 'end of print statement'");
  EXPECT_EQ(compile_error("{{ }}"), "t.jinja: line 1: expected an expression, got 'end of print statement'");
  EXPECT_EQ(compile_error("{{ 'abc }}"), "t.jinja: line 1: unterminated string literal");
  EXPECT_EQ(compile_error("x\n{# never closed"), "t.jinja: line 2: Missing end of comment tag");
  EXPECT_EQ(compile_error("{{ (1 }}"), "t.jinja: line 1: unexpected '}', expected ')'");
  EXPECT_EQ(compile_error("{{ 1 ]}}"), "t.jinja: line 1: unexpected ']'");
  EXPECT_EQ(compile_error("{{ x"), "t.jinja: line 1: unexpected end of template, expected '}}'");
  EXPECT_EQ(compile_error("{{ a $ b }}"), "t.jinja: line 1: unexpected char '$'");
  EXPECT_EQ(compile_error("{{ '\\x4' }}"), "t.jinja: line 1: truncated \\xXX escape");
  EXPECT_EQ(compile_error("{% break %}"), "t.jinja: line 1: 'break' outside loop");
  EXPECT_EQ(compile_error("{% for x in y %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
            "t.jinja: line 1: 'continue' outside loop");
  EXPECT_EQ(compile_error("{% macro m(a=1, b) %}{% endmacro %}"),
            "t.jinja: line 1: non-default argument follows default argument");
  EXPECT_EQ(compile_error("{{ x is defined is defined }}"), "t.jinja: line 1: You cannot chain multiple tests with is");
  EXPECT_EQ(compile_error("{% raw %}never closed"), "t.jinja: line 1: Missing end of raw directive");
  EXPECT_EQ(compile_error("{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}"),
            "t.jinja: line 1: nested deeper than 256 levels");
  EXPECT_EQ(compile_error("{{ " + std::string(3000, '-') + "1 }}"), "t.jinja: line 1: nested deeper than 256 levels");
  std::string ifs;
  for (int i = 0; i < 1000; ++i) ifs += "{% if x %}";
  EXPECT_EQ(compile_error(ifs), "t.jinja: line 1: nested deeper than 256 levels");
  EXPECT_EQ(compile_error("{{ 99999999999999999999 }}"),
            "t.jinja: line 1: integer literal too large (ragd's integers are 64-bit)");
}

TEST(Jinja, RuntimeErrorsCarryMessageAndLine) {
  EXPECT_EQ(render_error("ok\n{{ raise_exception('Conversation roles must alternate user/assistant') }}"),
            "t.jinja: line 2: Conversation roles must alternate user/assistant");
  EXPECT_EQ(render_error("{{ missing.attr }}"), "t.jinja: line 1: 'missing' is undefined");
  EXPECT_EQ(render_error("{{ d.k.x }}", Value::dict({{"d", Value::dict({})}})),
            "t.jinja: line 1: 'dict object' has no attribute 'k'");
  EXPECT_EQ(render_error("{{ 1 + 'a' }}"), "t.jinja: line 1: unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(render_error("{{ 'a' + 1 }}"), "t.jinja: line 1: can only concatenate str (not \"int\") to str");
  EXPECT_EQ(render_error("\n\n{{ 1 // 0 }}"), "t.jinja: line 3: integer division or modulo by zero");
  EXPECT_EQ(render_error("{{ 2 ** 64 }}"), "t.jinja: line 1: integer overflow (ragd's integers are 64-bit)");
  EXPECT_EQ(render_error("{{ 'x' % 1 }}"),
            "t.jinja: line 1: printf-style string formatting ('...' % args) is not supported");
  EXPECT_EQ(render_error("{{ [1].pop() }}"), "t.jinja: line 1: list.pop() is not supported (it would modify the list)");
  EXPECT_EQ(render_error("{{ x|tojson }}"), "t.jinja: line 1: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(render_error("{% set x = 1 %}{% set x.y = 2 %}"),
            "t.jinja: line 1: cannot assign attribute on non-namespace object");
  EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "t.jinja: line 1: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(render_error("{{ range(200000)|length }}"),
            "t.jinja: line 1: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  // A raise inside a macro reports the macro's line.
  EXPECT_EQ(render_error("{% macro m() %}\n{{ raise_exception('inside') }}\n{% endmacro %}\n\n{{ m() }}"),
            "t.jinja: line 2: inside");
}

TEST(Jinja, LimitsStopRunawayTemplates) {
  RenderOptions o;
  o.max_loop_iterations = 1000;
  EXPECT_EQ(render_error("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}", Value::dict({}), o),
            "t.jinja: line 1: more than 1000 loop iterations");
  o = {};
  o.max_output_bytes = 100;
  EXPECT_EQ(render_error("{% for i in range(50) %}abc{% endfor %}", Value::dict({}), o),
            "t.jinja: line 1: output larger than 100 bytes");
  EXPECT_EQ(render_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            "t.jinja: line 1: macro calls nested deeper than 200");
}

TEST(Jinja, StrftimeNowUsesThePinnedInstant) {
  RenderOptions o;
  o.now = std::chrono::system_clock::time_point(std::chrono::seconds(1721984703));  // 2024-07-26 09:05:03 UTC
  EXPECT_EQ(*render("{{ strftime_now('%d %b %Y %H:%M:%S') }}|{{ strftime_now('%z%Z') }}|{{ strftime_now('%f') }}",
                    Value::dict({}), o),
            "26 Jul 2024 09:05:03||000000");
  EXPECT_TRUE(render("{{ strftime_now('%Y') }}")->size() == 4);  // the clock
}

TEST(Jinja, ValuesConvertToAndFromJson) {
  auto v = Value::from_json(R"({"b": [1, 2.5, null, true, "x\u00e9\n"], "a": {}, "b": "last wins, first place"})");
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ASSERT_TRUE(v->is_dict());
  ASSERT_EQ(v->entries().size(), 2u);
  EXPECT_EQ(v->entries()[0].first, "b");
  EXPECT_EQ(v->get("b")->as_string(), "last wins, first place");
  EXPECT_EQ(*Value::from_json("[1, 2.5, null, true, \"\u00e9\"]")->to_json(), "[1, 2.5, null, true, \"\u00e9\"]");
  Value::JsonOptions o;
  o.ensure_ascii = true;
  o.indent = "  ";
  EXPECT_EQ(*Value::dict({{"k", Value::list({Value("\u00e9\U0001F600"), Value(1e16)})}}).to_json(o),
            "{\n  \"k\": [\n    \"\\u00e9\\ud83d\\ude00\",\n    1e+16\n  ]\n}");
  EXPECT_EQ(Value::list({Value(1), Value("a'b"), Value(), Value(true), Value(0.1)}, SeqKind::kTuple).repr(),
            "(1, \"a'b\", None, True, 0.1)");
  EXPECT_FALSE(Value::undefined().to_json().ok());
  EXPECT_FALSE(Value::from_json("{\"a\": ").ok());
}

TEST(Jinja, OneTemplateRendersFromManyThreads) {
  auto t = Template::compile(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m.content|length %}"
      "<{{ m.role }}>{{ m.content|trim }}{% if not loop.last %}|{% endif %}{% endfor %} {{ ns.n }}",
      "threads");
  ASSERT_TRUE(t.ok());
  auto context = [](int k) {
    std::vector<Value> ms;
    for (int i = 0; i <= k % 7; ++i)
      ms.push_back(Value::dict({{"role", i % 2 ? "assistant" : "user"}, {"content", " m" + std::to_string(k * 10 + i)}}));
    return Value::dict({{"messages", Value::list(std::move(ms))}});
  };
  std::vector<std::string> want;
  for (int k = 0; k < 64; ++k) want.push_back(*(*t)->render(context(k)));
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      for (int rep = 0; rep < 50; ++rep)
        for (int k = th; k < 64; k += 8)
          if (*(*t)->render(context(k)) != want[static_cast<size_t>(k)]) ++wrong;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

}  // namespace
}  // namespace ragd::engine::jinja
