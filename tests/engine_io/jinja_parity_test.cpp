// ragd's Jinja interpreter against python3's jinja2 configured as transformers configures it
// (render_jinja.py): hand-written snippets of every supported construct, the chat-template corpus
// (tests/data/chat_templates/*.jinja x conversations.json) and randomly generated template
// programs must render byte for byte the same; a case jinja2 fails on must fail here too. Skips
// only when python3 or its jinja2 is missing.
//
// The parity table in docs/benchmarks.md comes from this binary:
//   RAGD_JINJA_PARITY_TABLE=/tmp/parity.md build/bin/test_jinja --gtest_filter='JinjaParity.*'
// (RAGD_JINJA_PROGRAMS=N and RAGD_JINJA_SEED=S change the generated set.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>

#include "jinja_oracle.h"
#include "jinja_program_gen.h"

namespace ragd::testing {
namespace {

const std::string kRoot = RAGD_SOURCE_DIR;
const std::string kScript = kRoot + "/tests/engine_io/render_jinja.py";
const std::string kCorpusDir = kRoot + "/tests/data/chat_templates";

jinja::Value json(std::string_view text) {
  auto v = jinja::Value::from_json(text);
  EXPECT_TRUE(v.ok()) << v.status().to_string() << " in " << text;
  return v.ok() ? *v : jinja::Value();
}

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string show(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') out += "\\n\n";
    else out.push_back(c);
  }
  return out;
}

struct Tally {
  size_t identical = 0, both_failed = 0, mismatched = 0;
};

// Compares every case; returns the tally and reports each mismatch (the first few in full).
Tally compare_all(const std::vector<JinjaCase>& cases, const std::vector<JinjaOutcome>& want) {
  Tally t;
  for (size_t i = 0; i < cases.size(); ++i) {
    const JinjaOutcome got = render_with_ragd(cases[i]);
    if (got.ok && want[i].ok && got.text == want[i].text) {
      ++t.identical;
    } else if (!got.ok && !want[i].ok) {
      ++t.both_failed;
      // raise_exception's message must come through unchanged.
      constexpr std::string_view kRaised = "TemplateError: ";
      if (want[i].text.starts_with(kRaised))
        EXPECT_TRUE(got.text.ends_with(": " + want[i].text.substr(kRaised.size())))
            << cases[i].label << ": jinja2 raised '" << want[i].text << "', ragd '" << got.text << "'";
      if (std::getenv("RAGD_JINJA_SHOW_FAILURES") != nullptr)
        std::printf("%s\n  jinja2: %s\n  ragd:   %s\n  template:\n%s\n", cases[i].label.c_str(), want[i].text.c_str(),
                    got.text.c_str(), cases[i].template_source.c_str());
    } else {
      ++t.mismatched;
      if (t.mismatched <= 8) {
        ADD_FAILURE() << cases[i].label << "\n--- template:\n" << cases[i].template_source << "\n--- context: "
                      << cases[i].context.to_json().value() << "\n--- jinja2 (" << (want[i].ok ? "ok" : "error")
                      << "):\n" << show(want[i].text) << "\n--- ragd (" << (got.ok ? "ok" : "error") << "):\n"
                      << show(got.text);
      }
    }
  }
  if (t.mismatched > 8) ADD_FAILURE() << t.mismatched << " mismatches in all";
  return t;
}

class JinjaParity : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    python_ = find_python_with_jinja2(&why);
    if (python_.empty()) GTEST_SKIP() << "python3's jinja2 is the oracle: " << why;
  }

  std::vector<JinjaOutcome> oracle(const std::vector<JinjaCase>& cases) {
    std::string error;
    auto r = render_with_jinja2(python_, kScript, cases, &error);
    if (!r) {
      ADD_FAILURE() << error;
      return std::vector<JinjaOutcome>(cases.size());
    }
    return std::move(*r);
  }

  std::string python_;
};

// Parity rows, appended as the tests run and written out by the last one.
std::vector<std::string>& table_rows() {
  static std::vector<std::string> rows;
  return rows;
}

void write_table() {
  const char* path = std::getenv("RAGD_JINJA_PARITY_TABLE");
  std::string table = "| set | cases | byte-identical | both fail | mismatched |\n|---|---:|---:|---:|---:|\n";
  for (const auto& r : table_rows()) table += r + "\n";
  std::printf("%s", table.c_str());
  if (path != nullptr) std::ofstream(path) << table;
}

void add_row(const std::string& set, size_t n, const Tally& t) {
  table_rows().push_back("| " + set + " | " + std::to_string(n) + " | " + std::to_string(t.identical) + " | " +
                         std::to_string(t.both_failed) + " | " + std::to_string(t.mismatched) + " |");
}

// ---- snippets ------------------------------------------------------------------------------

struct Snippet {
  const char* tmpl;
  const char* context = "{}";
};

const Snippet kSnippets[] = {
    // whitespace control, trim_blocks / lstrip_blocks, comments, raw, trailing newline
    {"  {% if true %}\n  x\n  {% endif %}\n  y"},
    {"{{ 'a' }}  \n  {{ 'b' }}"},
    {"a  {%- if true %} b {% endif -%}  c"},
    {"{# c #}\n  {# d #}  \nx"},
    {"  {%+ if true %}x{% endif +%}\ny"},
    {"\t {%- set x = 1 -%} \n\n {{- x -}} \n"},
    {"{% raw %}{{ x }}{% endraw %}\n  {%- raw -%}  {% a %}  {%- endraw %}!"},
    {"line\r\nnext\rlast\n\n"},
    {"{% for i in [1, 2] %}\n  {{ i }}\n{% endfor %}\n"},
    {"{{- '  x  ' -}}\n\n{#- c -#}\n\n{{ 'y' }}"},
    {"{%- if true -%}\n\n   a   \n\n{%- endif -%}"},
    {"{{ {'a': {'b': 1}} }}{{ {'a': {'b': 1}}['a'] }}"},
    // literals and printing
    {"{{ [1, 2] }} {{ {'a': 1, 'b': 'x'} }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ none }} {{ true }} {{ 1.0 }}"},
    {"{{ 1e16 }} {{ 1e15 }} {{ 0.00001 }} {{ 0.0001 }} {{ 1.5e-7 }} {{ -0.0 }} {{ 123456789.125 }} {{ 1_000 }} {{ 0x1F }}"},
    {"{{ 'it\\'s' }} {{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }} {{ ['\\n\\t\\x01\\u00e9\\u200b', 'caf\u00e9'] }}"},
    {"{{ 'a' 'b' \"c\" }} {{ '\\x41\\101\\u0042\\U0001F600' }} {{ '\\q\\\\' }}"},
    {"{{ x }}", R"({"x": {"k": [1, 2.5, null, true, "s"], "e": {}}})"},
    // arithmetic
    {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7 / 2 }} {{ 4 / 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}"},
    {"{{ 'a' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ 3 * 'ab' }} {{ 1 + true }} {{ 0.1 + 0.2 }} {{ 1 - 2.5 }}"},
    {"{{ 1 ~ 2 ~ none ~ true }} {{ -x|abs }} {{ - 3 ** 2 }} {{ (-3) ** 2 }} {{ 2 + 3 * 4 - 1 }}", R"({"x": 3})"},
    {"{{ 1 / 0 }}"},
    {"{{ 'a' + 1 }}"},
    // comparisons, logic
    {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'a' }}"},
    {"{{ 1 or 2 }} {{ 0 or 'x' }} {{ 0 and 1 }} {{ [] or {} }} {{ not 0 }} {{ not not 'a' }} {{ none or none }}"},
    {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in u }}"},
    {"{{ 'x' if false }}|{{ 'x' if true else 'y' }}|{{ 'a' if 0 else 'b' if 1 else 'c' }}"},
    {"{{ 1 < 'a' }}"},
    // undefined
    {"[{{ u }}] {{ u is defined }} {{ u is undefined }} {{ u|default('d') }} {{ none|default('d') }} {{ ''|d('e', true) }} {{ u|length }}"},
    {"{{ u is iterable }} {{ u is sequence }} {{ u == u }} {{ u ~ 'x' }} {{ u|list }} {{ u|join }} {{ u|string }} {{ u|upper }}"},
    {"{% for x in u %}{{ x }}{% else %}empty{% endfor %}{% if u %}t{% else %}f{% endif %}"},
    {"{{ u.x }}"},
    {"{{ u + 1 }}"},
    {"{{ u[0] }}"},
    {"{{ d.missing }}|{{ d.missing is defined }}|{{ d['missing'] is none }}|{{ d.missing is not none }}", R"({"d": {"a": 1}})"},
    {"{{ d.missing.deeper }}", R"({"d": {"a": 1}})"},
    {"{{ n.x }}|{{ n['x'] }}|{{ 5.x }}|{{ 'abc'.x }}|{{ [1][5] }}|{{ 'abc'[9] }}|{{ {}['x'] }}", R"({"n": null})"},
    // subscripts, slices, attributes
    {"{{ m[1:] }} {{ m[::-1] }} {{ m[-2:] }} {{ m[:-1] }} {{ m[1:3:1] }} {{ m[::2] }} {{ m[5:] }} {{ m[-9:2] }}", R"({"m": [1, 2, 3, 4]})"},
    {"{{ s[1:] }} {{ s[::-1] }} {{ s[0] }} {{ s[-1] }} {{ s[1:-1] }} {{ s|length }}", R"({"s": "h\u00e9llo \ud83d\ude00"})"},
    {"{{ m.role }} {{ m['content'] }} {{ m.get('role') }} {{ m.get('x', 'dflt') }} {{ m.get('x') }} {{ m.items()|list }}",
     R"({"m": {"role": "user", "content": "hi"}})"},
    {"{{ t.0 }} {{ t[0].a }} {{ t.1 }}", R"({"t": [{"a": "first"}]})"},
    {"{{ m.items() }} {{ m.keys() }} {{ m.values() }} {{ m.keys()|list }}", R"({"m": {"a": 1, "b": [2]}})"},
    {"{{ l.append }}|{{ l.sort }}|{{ d.update }}|{{ d.pop }}", R"({"l": [1], "d": {}})"},
    {"{{ l.append(2) }}", R"({"l": [1]})"},
    // string methods
    {"{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ ' a '.lstrip() }}|{{ ' a '.rstrip() }}|{{ '\\u00a0a\\u3000'.strip() }}"},
    {"{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a b c'.rsplit(' ', 1) }} {{ ' a b '.split(none, 1) }}"},
    {"{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ 'hello wORLD'.title() }} {{ \"they're\".title() }}"},
    {"{{ 'aaa'.replace('a', 'b', 2) }} {{ 'abc'.replace('', '-') }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.rfind('c') }} {{ 'abcabc'.count('b') }}"},
    {"{{ '-'.join(['a', 'b']) }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'ab'.center(6, '*') }} {{ '42'.zfill(5) }} {{ 'x'.isdigit() }} {{ '12'.isdigit() }}"},
    {"{{ 'stra\u00dfe'.upper() }} {{ '\u00c9COLE'.lower() }} {{ '\u00e9cole'.capitalize() }} {{ 'pre_x'.removeprefix('pre_') }} {{ 'a=b=c'.partition('=') }}"},
    // filters
    {"{{ '  x '|trim }}|{{ 'xax'|trim('x') }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello world'|capitalize }}|{{ 'hello-world (x)'|title }}"},
    {"{{ [3, 1, 2]|sort }} {{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ [3, 1]|sort(reverse=true) }}"},
    {"{{ d|dictsort }} {{ d|dictsort(by='value') }} {{ d|items|list }} {{ d|list }} {{ d|length }}", R"({"d": {"b": 2, "a": 3}})"},
    {"{{ [1, 2, 3]|first }} {{ [1, 2, 3]|last }} {{ []|first }} {{ 'abc'|first }} {{ {'k': 1}|first }} {{ [1, 2]|join(', ') }} {{ [1, 2]|join }}"},
    {"{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '0x1A'|int(0, 16) }} {{ '12'|float }} {{ 'n'|float }} {{ true|int }}"},
    {"{{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ -2.5|round }} {{ 7|round }} {{ 7.1|round(method='ceil') }} {{ 7.9|round(0, 'floor') }}"},
    {"{{ -3|abs }} {{ (-3.5)|abs }} {{ [1, 2, 3]|sum }} {{ [1, 2]|max }} {{ [3, 1]|min }} {{ ['a', 'B']|max }} {{ []|max }}"},
    {"{{ x|tojson }}|{{ x|tojson(indent=2) }}|{{ x|tojson(sort_keys=true) }}|{{ x|tojson(separators=(',', ':')) }}|{{ x|tojson(ensure_ascii=true) }}",
     R"({"x": {"b": [1, 2.5, null, true, "\u00e9<>&'\"\\\n\u0001\u007f\ud83d\ude00"], "a": {}, "c": []}})"},
    {"{{ 'x'|tojson }} {{ 1.0|tojson }} {{ 10000000000000000.0|tojson }} {{ none|tojson }}"},
    {"{{ u|tojson }}"},
    {"{{ ms|map(attribute='role')|list }} {{ ms|map(attribute='x', default='-')|join }} {{ ['a', 'b']|map('upper')|list }}",
     R"({"ms": [{"role": "user"}, {"role": "assistant"}]})"},
    {"{{ ms|selectattr('role', 'equalto', 'user')|list }} {{ ms|rejectattr('role', 'eq', 'user')|map(attribute='role')|list }}",
     R"({"ms": [{"role": "user"}, {"role": "assistant"}, {"role": "user", "x": 1}]})"},
    {"{{ ms|selectattr('x')|list }} {{ ms|selectattr('x', 'defined')|list|length }} {{ ms|rejectattr('x', 'undefined')|list }}",
     R"({"ms": [{"role": "user"}, {"role": "assistant", "x": 0}, {"x": 2}]})"},
    {"{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('even')|list }} {{ [0, 1, '', 'a']|select|list }}"},
    {"{% if [1]|select('even') %}truthy{% endif %} {{ [1, 2]|select('odd')|first }}"},
    {"{% set g = [1, 2, 3]|select('odd') %}{{ g|list }}{{ g|list }}"},
    {"{{ [1, 2]|select('odd')|length }}"},
    {"{{ ['a', 'A', 'b', 'a']|unique|list }} {{ ['a', 'A']|unique(case_sensitive=true)|list }} {{ [1, true, 1.0, 2]|unique|list }}"},
    {"{{ 'abc'|reverse }} {{ [1, 2]|reverse|list }} {{ 'a\\nb\\n\\nc'|indent }} {{ 'a\\nb'|indent(2, true) }} {{ 'a\\n\\nb'|indent('> ', blank=true) }}"},
    {"{{ 'a<b>&\"\\''|e }} {{ '<x>'|safe }} {{ 5|string ~ 'x' }} {{ [1, 2]|list }} {{ 'ab'|list }} {{ 'one two  three'|wordcount }}"},
    {"{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3]|batch(2, 0)|list }} {{ 'x'|center(5) }} {{ 'abc'|replace('b', 'B') }} {{ 'aaa'|replace('a', 'b', 1) }}"},
    {"{{ {'a': 1}|attr('a') }}|{{ {'a': 1}|attr('items') is callable }}"},
    // tests
    {"{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 5 is divisibleby 5 }} {{ 4 is even }} {{ 3 is odd }} {{ none is none }}"},
    {"{{ 1 is number }} {{ true is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.5 is float }} {{ true is boolean }} {{ 1 is boolean }}"},
    {"{{ {} is mapping }} {{ [] is mapping }} {{ 'a' is string }} {{ {} is sequence }} {{ 'a' is iterable }} {{ 5 is iterable }} {{ range is callable }}"},
    {"{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 2 is in [1, 2] }} {{ 2 is eq 2 }} {{ 2 is ne 3 }} {{ 2 is lt 3 }} {{ 3 is ge 3 }} {{ 2 is gt(1) }}"},
    {"{{ none is sameas none }} {{ 1 is sameas 1 }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }} {{ x is not none }}"},
    // loops
    {"{% for i in [1, 2, 3] if i > 1 %}{{ loop.index }}/{{ loop.length }}{% else %}none{% endfor %}"},
    {"{% for x in 'abc' %}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ x }};{% endfor %}"},
    {"{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }}-{{ loop.depth }};{% endfor %}"},
    {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}{% for p in d|dictsort %}{{ p[0] }}{% endfor %}",
     R"({"d": {"z": 1, "a": 2}})"},
    {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}{% for (a, b) in [(1, 2)] %}{{ a }}{{ b }}{% endfor %}"},
    {"{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}"},
    {"{% for i in range(5) %}{% if i == 1 %}{% continue %}{% endif %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"},
    {"{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index }}|{% endfor %}"},
    {"{{ range(3)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}"},
    {"{% for x in 5 %}{% endfor %}"},
    {"{% for x in none %}{% endfor %}"},
    // scoping, set, namespace
    {"{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"},
    {"{% set x = 1 %}{% if true %}{% set x = 3 %}{% endif %}{{ x }}"},
    {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c, = [5] %}{{ c }}{% set t = 1, 2 %}{{ t }}"},
    {"{% set ns = namespace(a=1, b=[]) %}{% for i in [1, 2] %}{% set ns.a = ns.a + i %}{% endfor %}{{ ns.a }} {{ ns.b }} {{ ns.z }}"},
    {"{% set ns = namespace({'k': 'v'}) %}{{ ns.k }}{% set ns.k = ns.k * 2 %}{{ ns.k }}{{ ns['k'] }}"},
    {"{% set x = 1 %}{% set x.y = 2 %}"},
    {"{% set x %}a{{ 1 }}b{% endset %}[{{ x }}]{% set y | upper | replace('A', '@') %}ab{% endset %}[{{ y }}]"},
    {"{% with a = 1, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}"},
    {"{% filter upper %}ab{{ 'c' }}{% endfilter %}{% filter replace('a', 'x')|title %}a b{% endfilter %}"},
    {"{% print 1, 'a' %}{% print [1] %}"},
    {"{% generation %}{% set z = 1 %}{{ z }}{% endgeneration %}[{{ z }}]"},
    {"{{ dict(a=1, b='x') }} {{ dict([['k', 1]]) }} {{ namespace(a=1).a }}"},
    // macros
    {"{% macro m(a, b='d') %}[{{ a }}|{{ b }}]{% endmacro %}{{ m(1) }}{{ m(1, 2) }}{{ m(b=3, a=4) }}{{ m() }}"},
    {"{% macro m(a, b=a) %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}"},
    {"{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}"},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"},
    {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(b=2) }}"},
    {"{% macro m() %}[{{ i }}]{% endmacro %}{% for i in [1, 2] %}{{ m() }}{% endfor %}{% set i = 9 %}{{ m() }}"},
    {"{% for i in [1, 2] %}{% macro m() %}[{{ i }}]{% endmacro %}{{ m() }}{% endfor %}"},
    {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}"},
    {"{% macro m() %}x{% endmacro %}{{ m }} {{ m is callable }} {{ m() ~ m() }}"},
    {"{% macro render(msg) %}{{ msg.role|upper }}: {{ msg.content|trim }}{% endmacro %}{% for m in ms %}{{ render(m) }}\n{% endfor %}",
     R"({"ms": [{"role": "user", "content": " hi "}, {"role": "assistant", "content": "yo\n"}]})"},
    // HF globals
    {"{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M:%S.%f') }} [{{ strftime_now('%z%Z') }}] {{ strftime_now('%A %B %-d %I%p %j') }}"},
    {"{% if true %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"},
    {"{{ raise_exception('x' ~ 1) }}"},
    {"{{ messages[0]['content'] }}{{ add_generation_prompt }}{{ bos_token }}{{ tools is none }}",
     R"({"messages": [{"role": "user", "content": "c"}], "add_generation_prompt": true, "bos_token": "<s>", "tools": null})"},
};

TEST_F(JinjaParity, Snippets) {
  std::vector<JinjaCase> cases;
  int i = 0;
  for (const Snippet& s : kSnippets) cases.push_back({"snippet " + std::to_string(i++), s.tmpl, json(s.context)});
  const Tally t = compare_all(cases, oracle(cases));
  add_row("hand-written snippets", cases.size(), t);
  EXPECT_EQ(t.mismatched, 0u);
}

// ---- the corpus ----------------------------------------------------------------------------

std::vector<std::pair<std::string, std::string>> corpus_templates() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : std::filesystem::directory_iterator(kCorpusDir))
    if (e.path().extension() == ".jinja") out.emplace_back(e.path().stem().string(), read(e.path()));
  std::sort(out.begin(), out.end());
  return out;
}

// Context the way transformers builds it: messages, tools, documents, add_generation_prompt and
// the tokenizer's special tokens (the template's family's), plus any extra kwargs.
jinja::Value chat_context(const jinja::Value& conv, const std::string& family) {
  static const std::map<std::string, std::pair<std::string, std::string>> kTokens = {
      {"llama3", {"<|begin_of_text|>", "<|eot_id|>"}}, {"qwen25", {"", "<|im_end|>"}},
      {"mistral", {"<s>", "</s>"}},                   {"gemma", {"<bos>", "<eos>"}},
      {"phi3", {"<s>", "<|endoftext|>"}},              {"deepseek", {"<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"}},
      {"llama2", {"<s>", "</s>"}},                    {"rag", {"<|startoftext|>", "<|endoftext|>"}},
  };
  std::vector<std::pair<std::string, jinja::Value>> ctx;
  ctx.emplace_back("messages", *conv.get("messages"));
  ctx.emplace_back("tools", conv.get("tools") != nullptr ? *conv.get("tools") : jinja::Value());
  ctx.emplace_back("documents", conv.get("documents") != nullptr ? *conv.get("documents") : jinja::Value());
  const jinja::Value* agp = conv.get("add_generation_prompt");
  ctx.emplace_back("add_generation_prompt", agp != nullptr ? *agp : jinja::Value(true));
  for (const auto& [k, tok] : kTokens) {
    if (family.rfind(k, 0) == 0) {
      if (!tok.first.empty()) ctx.emplace_back("bos_token", tok.first);
      ctx.emplace_back("eos_token", tok.second);
    }
  }
  if (const jinja::Value* extra = conv.get("extra"))
    for (const auto& [k, v] : extra->entries()) ctx.emplace_back(k, v);
  return jinja::Value::dict(std::move(ctx));
}

TEST_F(JinjaParity, CorpusTemplatesTimesConversations) {
  const auto templates = corpus_templates();
  ASSERT_GE(templates.size(), 6u) << kCorpusDir;
  const jinja::Value convs = json(read(kCorpusDir + "/conversations.json"));
  ASSERT_TRUE(convs.is_list());
  std::vector<JinjaCase> cases;
  for (const auto& [name, src] : templates)
    for (const jinja::Value& conv : convs.items())
      cases.push_back({name + " x " + conv.get("name")->as_string(), src, chat_context(conv, name)});
  const auto want = oracle(cases);
  const Tally t = compare_all(cases, want);
  add_row("chat templates (" + std::to_string(templates.size()) + ") x conversations (" +
              std::to_string(convs.items().size()) + ")",
          cases.size(), t);
  EXPECT_EQ(t.mismatched, 0u);
  // Most pairs render; the failures are the templates' own raise_exception on conversations
  // their family does not accept (a system turn, a tool call).
  EXPECT_GT(t.identical, cases.size() * 3 / 4);
}

// ---- generated programs --------------------------------------------------------------------

TEST_F(JinjaParity, GeneratedPrograms) {
  const char* n_env = std::getenv("RAGD_JINJA_PROGRAMS");
  const char* seed_env = std::getenv("RAGD_JINJA_SEED");
  const size_t n = n_env != nullptr ? std::strtoul(n_env, nullptr, 10) : 1000;
  const uint64_t seed = seed_env != nullptr ? std::strtoull(seed_env, nullptr, 10) : 20240726;
  ProgramGenerator gen(seed);
  std::vector<JinjaCase> cases;
  for (size_t i = 0; i < n; ++i) {
    GeneratedProgram p = gen.next();
    cases.push_back({"program " + std::to_string(i) + " (seed " + std::to_string(seed) + ")", std::move(p.source),
                     std::move(p.context)});
  }
  const Tally t = compare_all(cases, oracle(cases));
  add_row("generated programs (seed " + std::to_string(seed) + ")", cases.size(), t);
  EXPECT_EQ(t.mismatched, 0u);
  EXPECT_GT(t.identical, n * 9 / 10);  // the generator aims at valid programs
  write_table();
}

}  // namespace
}  // namespace ragd::testing
