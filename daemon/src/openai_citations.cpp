// Citations of a RAG answer as url_citation annotations (openai_citations.h).
#include "openai_citations.h"

#include <algorithm>
#include <cctype>

#include "ragd/common/utf8.h"

namespace ragd::daemon {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// A marker "[" n ("," " "* n)* "]" starting at text[i] (text[i] == '['): its numbers and end.
bool parse_marker(const std::string& t, size_t i, std::vector<size_t>* nums, size_t* end) {
  nums->clear();
  size_t j = i + 1;
  for (;;) {
    while (j < t.size() && t[j] == ' ') ++j;
    size_t n = 0, digits = 0;
    while (j < t.size() && is_digit(t[j]) && digits < 4) n = n * 10 + static_cast<size_t>(t[j++] - '0'), ++digits;
    if (digits == 0 || (j < t.size() && is_digit(t[j]))) return false;
    nums->push_back(n);
    while (j < t.size() && t[j] == ' ') ++j;
    if (j < t.size() && t[j] == ',') {
      ++j;
      continue;
    }
    if (j < t.size() && t[j] == ']') {
      *end = j + 1;
      return true;
    }
    return false;
  }
}

}  // namespace

std::vector<Citation> find_citations(const std::string& answer, const std::vector<CitationContext>& contexts) {
  std::vector<Citation> out;
  if (contexts.empty()) return out;
  std::vector<size_t> nums;
  size_t cp = 0;  // code points before byte i
  size_t ctx = 0;
  for (size_t i = 0; i < answer.size(); ++i) {
    if (answer[i] == '[') {
      while (ctx + 1 < contexts.size() && contexts[ctx + 1].from_byte <= i) ++ctx;
      size_t end = 0;
      if (parse_marker(answer, i, &nums, &end)) {
        // The marker is ASCII: its span in code points is its span in bytes.
        const auto& sources = contexts[ctx].sources;
        for (size_t n : nums)
          if (n >= 1 && n <= sources.size()) out.push_back({cp, cp + (end - i), n - 1, ctx});
        cp += end - i;
        i = end - 1;
        continue;
      }
    }
    if (!utf8_continuation(answer[i])) ++cp;
  }
  return out;
}

std::string sources_footer(const std::vector<pipelines::Source>& sources, bool numbered) {
  if (sources.empty()) return {};
  std::string out = "\n\nSources:";
  std::vector<std::string> seen;
  for (size_t i = 0; i < sources.size(); ++i) {
    const pipelines::Source& s = sources[i];
    std::string where;
    for (const auto& h : s.section) where += (where.empty() ? "" : " > ") + h;
    if (s.page > 0) where += (where.empty() ? "page " : ", page ") + std::to_string(s.page);
    std::string line = (s.title.empty() ? s.doc_id : s.title) + " \u2014 " + (s.url.empty() ? document_route(s.doc_id) : s.url);
    if (!where.empty()) line += " (" + where + ")";
    // A numbered passage keeps its line even when it repeats another's: answers cite it by number.
    if (!numbered) {
      if (std::find(seen.begin(), seen.end(), line) != seen.end()) continue;
      seen.push_back(line);
    }
    out += "\n";
    if (numbered) out += "[" + std::to_string(i + 1) + "] ";
    out += line;
  }
  return out;
}

std::string document_route(const std::string& doc_id) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out = "/v1/documents/";
  for (unsigned char c : doc_id) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '!' || c == '~' || c == '*' || c == '\'' ||
        c == '(' || c == ')') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

void write_url_citations(JsonWriter& w, const std::string& answer, const std::vector<CitationContext>& contexts) {
  w.begin_array();
  for (const Citation& c : find_citations(answer, contexts)) {
    const pipelines::Source& s = contexts[c.context].sources[c.source_index];
    w.begin_object().key("type").value("url_citation").key("url_citation").begin_object();
    w.key("start_index").value(static_cast<uint64_t>(c.start_index)).key("end_index").value(static_cast<uint64_t>(c.end_index));
    w.key("title").value(s.title.empty() ? s.doc_id : s.title);
    w.key("url").value(s.url.empty() ? document_route(s.doc_id) : s.url);
    w.key("doc_id").value(s.doc_id).key("source_index").value(static_cast<uint64_t>(c.source_index));
    w.end_object().end_object();
  }
  w.end_array();
}

}  // namespace ragd::daemon
