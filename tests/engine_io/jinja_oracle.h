// Test helper: renders a batch of (template, context) cases with python3's jinja2 configured as
// transformers configures it (tests/engine_io/render_jinja.py), and with ragd's interpreter, for
// byte-for-byte comparison. Test-only, header-only.
// Thread-safety: call from the test's main thread (fork + exec).
#pragma once

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "../run_capture.h"
#include "ragd/engine/jinja.h"

namespace ragd::testing {

namespace jinja = ragd::engine::jinja;

struct JinjaCase {
  std::string label;     // for failure messages and tables
  std::string template_source;
  jinja::Value context;  // a dict
};

struct JinjaOutcome {
  bool ok = false;
  std::string text;  // the rendering, or the error message
};

// The strftime_now() instant the oracle uses (render_jinja.py FIXED_NOW, read as UTC here).
inline jinja::RenderOptions oracle_render_options() {
  jinja::RenderOptions o;
  // 2024-07-26 09:05:03.123456 UTC
  o.now = std::chrono::system_clock::time_point(std::chrono::microseconds(int64_t{1721984703} * 1000000 + 123456));
  return o;
}

inline JinjaOutcome render_with_ragd(const JinjaCase& c) {
  auto t = jinja::Template::compile(c.template_source, c.label);
  if (!t.ok()) return {false, t.status().message()};
  auto r = (*t)->render(c.context, oracle_render_options());
  if (!r.ok()) return {false, r.status().message()};
  return {true, *r};
}

// A python3 with jinja2, or empty (the reason in *why).
// RAGD_JINJA_PYTHON picks another interpreter (another jinja2 version).
inline std::string find_python_with_jinja2(std::string* why) {
  std::vector<std::string> candidates = {"/usr/bin/python3", "/usr/local/bin/python3"};
  if (const char* py = std::getenv("RAGD_JINJA_PYTHON")) candidates = {py};
  for (const std::string& py : candidates) {
    if (!std::filesystem::exists(py)) continue;
    Ran r = run_capture({py, "-c", "import jinja2"});
    if (r.status == 0) return py;
    *why = py + " has no jinja2 (Debian: apt-get install python3-jinja2)";
  }
  if (why->empty()) *why = "no python3 found";
  return {};
}

// Runs the oracle over every case; nullopt (with *error) when the oracle itself could not run.
inline std::optional<std::vector<JinjaOutcome>> render_with_jinja2(const std::string& python, const std::string& script,
                                                                   const std::vector<JinjaCase>& cases,
                                                                   std::string* error) {
  std::vector<jinja::Value> items;
  for (const auto& c : cases)
    items.push_back(jinja::Value::dict({{"template", c.template_source}, {"context", c.context}}));
  auto in_json = jinja::Value::dict({{"cases", jinja::Value::list(std::move(items))}}).to_json();
  if (!in_json.ok()) {
    *error = in_json.status().message();
    return std::nullopt;
  }
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("ragd_jinja_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string in_path = base.string() + ".in.json", out_path = base.string() + ".out.json";
  {
    std::ofstream f(in_path, std::ios::binary);
    f << *in_json;
  }
  Ran r = run_capture({python, script, in_path, out_path});
  std::filesystem::remove(in_path);
  if (r.status != 0) {
    *error = "oracle failed (" + std::to_string(r.status) + "): " + r.err;
    return std::nullopt;
  }
  auto parsed = jinja::Value::from_json(slurp_file(out_path));
  std::filesystem::remove(out_path);
  if (!parsed.ok() || !parsed->is_list()) {
    *error = "oracle output unreadable: " + parsed.status().message();
    return std::nullopt;
  }
  std::vector<JinjaOutcome> out;
  for (const auto& v : parsed->items()) {
    const bool ok = v.get("ok") != nullptr && v.get("ok")->truthy();
    const jinja::Value* text = v.get(ok ? "out" : "error");
    out.push_back({ok, text != nullptr && text->is_string() ? text->as_string() : std::string()});
  }
  if (out.size() != cases.size()) {
    *error = "oracle returned " + std::to_string(out.size()) + " results for " + std::to_string(cases.size()) + " cases";
    return std::nullopt;
  }
  return out;
}

}  // namespace ragd::testing
