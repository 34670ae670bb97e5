// Tool-call formats and their parsers (tool_calls.h).
#include "ragd/engine/tool_calls.h"

#include <array>
#include <cctype>

namespace ragd::engine {

namespace {

const std::array<ToolCallFormat, 3> kFormats = {{
    {"hermes", "", "", "<tool_call>\n", "\n</tool_call>", "\n", "arguments"},
    {"llama3_json", "", "", "", "", "; ", "parameters"},
    {"mistral", "[TOOL_CALLS][", "]", "", "", ", ", "arguments"},
}};

bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

// The calls of an answer, read from the text that starts at the trigger; partial at the end.
enum class Scan { kComplete, kIncomplete, kError };

struct PartialCall {
  bool has_name = false;
  std::string name;
  size_t args_begin = 0, args_end = 0;  // the arguments' bytes seen so far
  bool args_done = false;
  bool done = false;  // the call (end marker included) is complete
};

class CallScanner {
 public:
  CallScanner(const ToolCallFormat& f, std::string_view s) : f_(f), s_(s) {}

  Scan run(std::vector<PartialCall>* calls) {
    if (Scan r = literal(f_.list_begin); r != Scan::kComplete) return r;
    for (;;) {
      if (!calls->empty()) {
        skip_ws();
        if (!f_.list_end.empty()) {
          if (p_ == s_.size()) return Scan::kIncomplete;
          if (starts(trim(f_.list_end))) {
            p_ += trim(f_.list_end).size();
            end_ = p_;
            return Scan::kComplete;
          }
        } else if (p_ == s_.size()) {
          return Scan::kComplete;  // more calls may follow while streaming: the caller knows
        }
        if (Scan r = literal(f_.separator); r != Scan::kComplete) return r;
      }
      calls->emplace_back();
      if (Scan r = call(&calls->back()); r != Scan::kComplete) {
        if (r == Scan::kError && f_.list_end.empty() && calls->size() > 1 && calls->back().args_begin == 0) {
          calls->pop_back();  // text after the calls that is not another call: ignored
          return Scan::kComplete;
        }
        return r;
      }
      calls->back().done = true;
      end_ = p_;
    }
  }
  size_t end() const { return end_; }

 private:
  bool starts(std::string_view lit) const { return s_.substr(p_, lit.size()) == lit; }
  void skip_ws() {
    while (p_ < s_.size() && is_ws(s_[p_])) ++p_;
  }
  // The format's literal, whitespace around it optional.
  Scan literal(std::string_view lit) {
    lit = trim(lit);
    skip_ws();
    if (lit.empty()) return Scan::kComplete;
    const std::string_view rest = s_.substr(p_);
    if (rest.size() < lit.size()) return lit.substr(0, rest.size()) == rest ? Scan::kIncomplete : Scan::kError;
    if (rest.substr(0, lit.size()) != lit) return Scan::kError;
    p_ += lit.size();
    return Scan::kComplete;
  }
  Scan string(std::string* out) {
    if (p_ == s_.size()) return Scan::kIncomplete;
    if (s_[p_] != '"') return Scan::kError;
    ++p_;
    while (p_ < s_.size()) {
      const char c = s_[p_++];
      if (c == '"') return Scan::kComplete;
      if (c == '\\') {
        if (p_ == s_.size()) return Scan::kIncomplete;
        const char e = s_[p_++];
        if (out) out->push_back(e == 'n' ? '\n' : e == 't' ? '\t' : e);
        continue;
      }
      if (out) out->push_back(c);
    }
    return Scan::kIncomplete;
  }
  // Any JSON value (syntax checked only as far as finding its end).
  Scan value() {
    skip_ws();
    if (p_ == s_.size()) return Scan::kIncomplete;
    const char c = s_[p_];
    if (c == '"') return string(nullptr);
    if (c == '{' || c == '[') {
      int depth = 0;
      while (p_ < s_.size()) {
        const char d = s_[p_];
        if (d == '"') {
          if (Scan r = string(nullptr); r != Scan::kComplete) return r;
          continue;
        }
        ++p_;
        if (d == '{' || d == '[') ++depth;
        else if (d == '}' || d == ']') {
          if (--depth == 0) return Scan::kComplete;
        }
      }
      return Scan::kIncomplete;
    }
    const size_t b = p_;
    while (p_ < s_.size() && !is_ws(s_[p_]) && s_[p_] != ',' && s_[p_] != '}' && s_[p_] != ']') ++p_;
    if (p_ == s_.size()) return Scan::kIncomplete;
    return p_ > b ? Scan::kComplete : Scan::kError;
  }
  Scan call(PartialCall* pc) {
    if (Scan r = literal(f_.call_begin); r != Scan::kComplete) return r;
    skip_ws();
    if (p_ == s_.size()) return Scan::kIncomplete;
    if (s_[p_] != '{') return Scan::kError;
    ++p_;
    bool first = true;
    for (;;) {
      skip_ws();
      if (p_ == s_.size()) return Scan::kIncomplete;
      if (first && s_[p_] == '}') return Scan::kError;  // a call names its function
      if (!first) {
        if (s_[p_] == '}') {
          ++p_;
          break;
        }
        if (s_[p_] != ',') return Scan::kError;
        ++p_;
        skip_ws();
      }
      first = false;
      std::string key;
      if (Scan r = string(&key); r != Scan::kComplete) return r;
      skip_ws();
      if (p_ == s_.size()) return Scan::kIncomplete;
      if (s_[p_] != ':') return Scan::kError;
      ++p_;
      skip_ws();
      if (key == "name") {
        std::string name;
        if (Scan r = string(&name); r != Scan::kComplete) return r;
        pc->name = std::move(name);
        pc->has_name = true;
      } else if (key == f_.args_key) {
        pc->args_begin = p_;
        const Scan r = value();
        pc->args_end = p_;
        if (r != Scan::kComplete) return r;
        pc->args_done = true;
      } else if (Scan r = value(); r != Scan::kComplete) {
        return r;
      }
    }
    if (!pc->has_name) return Scan::kError;
    if (!pc->args_done) pc->args_begin = pc->args_end = 0;  // no arguments: "{}"
    return literal(f_.call_end);
  }

  const ToolCallFormat& f_;
  std::string_view s_;
  size_t p_ = 0;
  size_t end_ = 0;
};

std::string_view args_of(std::string_view region, const PartialCall& c) {
  if (c.args_end == 0) return "{}";
  return region.substr(c.args_begin, c.args_end - c.args_begin);
}

// Where the calls start in `text`, from `from` on; npos when they do not (yet).
size_t find_trigger(const ToolCallFormat& f, std::string_view text, size_t from) {
  if (!f.trigger().empty()) return text.find(trim(f.trigger()), from);
  size_t i = 0;
  while (i < text.size() && is_ws(text[i])) ++i;
  return i < text.size() && text[i] == '{' ? i : std::string_view::npos;
}

}  // namespace

bool valid_tool_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  return true;
}

std::string ToolCallFormat::render_call(std::string_view fn, std::string_view arguments) const {
  std::string s = call_begin;
  s += "{\"name\": \"";
  s += fn;
  s += "\", \"";
  s += args_key;
  s += "\": ";
  s += arguments;
  s += '}';
  s += call_end;
  return s;
}

std::string ToolCallFormat::render_calls(const std::vector<ToolCall>& calls) const {
  std::string s = list_begin;
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i > 0) s += separator;
    s += render_call(calls[i].name, calls[i].arguments);
  }
  return s + list_end;
}

Result<ToolCallFormat> tool_call_format(std::string_view name) {
  for (const auto& f : kFormats)
    if (f.name == name) return f;
  std::string names;
  for (const auto& f : kFormats) names += (names.empty() ? "" : ", ") + f.name;
  return Status::InvalidArgument("unknown tool call format '" + std::string(name) + "' (supported: " + names + ")");
}

std::vector<std::string> tool_call_format_names() {
  std::vector<std::string> v;
  for (const auto& f : kFormats) v.push_back(f.name);
  return v;
}

ToolCallFormat detect_tool_call_format(std::string_view src, std::string_view fallback) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  std::string_view name = fallback;
  if (has("[TOOL_CALLS]")) name = "mistral";
  else if (has("<tool_call>")) name = "hermes";
  else if (has("parameters") && (has("<|python_tag|>") || has("ipython"))) name = "llama3_json";
  auto f = tool_call_format(name);
  return f.ok() ? *f : kFormats[0];
}

ToolOutput parse_tool_calls(const ToolCallFormat& f, std::string_view text) {
  ToolOutput out;
  const size_t at = find_trigger(f, text, 0);
  if (at == std::string_view::npos) {
    out.content = std::string(text);
    return out;
  }
  const std::string_view region = text.substr(at);
  std::vector<PartialCall> calls;
  CallScanner sc(f, region);
  if (sc.run(&calls) != Scan::kComplete || calls.empty() || !calls.back().done) {
    out.content = std::string(text);
    return out;
  }
  for (const auto& c : calls) out.calls.push_back({"", c.name, std::string(args_of(region, c))});
  out.content = std::string(text.substr(0, at));
  while (!out.content.empty() && is_ws(out.content.back())) out.content.pop_back();
  return out;
}

ToolCallStream::Delta ToolCallStream::feed(std::string_view text) {
  text_ += text;
  return step(false);
}

ToolCallStream::Delta ToolCallStream::finish() { return step(true); }

ToolCallStream::Delta ToolCallStream::step(bool final) {
  Delta d;
  auto content_to = [&](size_t end) {
    if (end > content_sent_) d.content += text_.substr(content_sent_, end - content_sent_);
    content_sent_ = std::max(content_sent_, end);
  };
  if (failed_) {
    if (sent_.empty()) content_to(text_.size());  // after calls went out, the rest is dropped
    return d;
  }
  if (!in_calls_) {
    const std::string_view trig = trim(f_.trigger());
    if (trig.empty()) {
      // The calls are the whole answer: decided by its first non-blank byte.
      const size_t at = find_trigger(f_, text_, 0);
      if (at != std::string::npos) {
        in_calls_ = true;
        calls_at_ = at;
      } else {
        size_t i = 0;
        while (i < text_.size() && is_ws(text_[i])) ++i;
        if (i < text_.size() || final) failed_ = true;  // text: no calls in this answer
        if (failed_) content_to(text_.size());
        return d;
      }
    } else {
      const size_t at = text_.find(trig, content_sent_);
      if (at == std::string::npos) {
        // Hold back the longest tail that could still become the trigger, and trailing blanks
        // (they go out with the text that follows them, not before calls).
        size_t keep = 0;
        if (!final) {
          for (size_t k = std::min(trig.size() - 1, text_.size() - content_sent_); k > 0; --k)
            if (text_.compare(text_.size() - k, k, trig.substr(0, k)) == 0) {
              keep = k;
              break;
            }
          while (keep < text_.size() - content_sent_ && is_ws(text_[text_.size() - keep - 1])) ++keep;
        }
        content_to(text_.size() - keep);
        return d;
      }
      size_t end = at;  // the text before the calls, without its trailing blanks
      while (end > content_sent_ && is_ws(text_[end - 1])) --end;
      content_to(end);
      in_calls_ = true;
      calls_at_ = at;
    }
  }
  const std::string_view region = std::string_view(text_).substr(calls_at_);
  std::vector<PartialCall> calls;
  CallScanner sc(f_, region);
  const Scan r = sc.run(&calls);
  const bool bad = r == Scan::kError || (final && (r != Scan::kComplete || calls.empty() || !calls.back().done));
  if (bad && sent_.empty()) {
    failed_ = true;  // not calls after all: the text goes out as it is
    content_to(text_.size());
    return d;
  }
  for (size_t i = 0; i < calls.size(); ++i) {
    const PartialCall& c = calls[i];
    if (!c.has_name) break;
    if (i >= sent_.size()) {
      sent_.push_back({c.name, 0});
      d.calls.push_back({i, true, c.name, ""});
    }
    Sent& s = sent_[i];
    std::string_view args;
    if (c.args_end > 0) args = region.substr(c.args_begin, c.args_end - c.args_begin);
    else if (c.done) args = "{}";
    if (args.size() > s.args_sent) {
      if (d.calls.empty() || d.calls.back().index != i) d.calls.push_back({i, false, "", ""});
      d.calls.back().arguments += args.substr(s.args_sent);
      s.args_sent = args.size();
    }
  }
  if (bad) failed_ = true;  // calls went out already: the rest is dropped
  return d;
}

}  // namespace ragd::engine
