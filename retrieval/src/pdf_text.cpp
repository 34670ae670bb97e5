#include "pdf_text.h"

#include <poppler/cpp/poppler-document.h>
#include <poppler/cpp/poppler-global.h>
#include <poppler/cpp/poppler-page.h>
#include <poppler/cpp/poppler-toc.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>

#include "ragd/common/echo.h"
#include "ragd/common/utf8.h"
#include "ragd/retrieval/text_util.h"

namespace ragd::retrieval {

namespace {

std::mutex& pdf_mutex() {
  static std::mutex m;
  return m;
}

// What poppler reported during the current pdf_to_text call (its first few messages).
// guarded by pdf_mutex()
std::vector<std::string>* g_poppler_errors = nullptr;

void on_poppler_error(const std::string& msg, void*) {
  if (!g_poppler_errors || g_poppler_errors->size() >= 4) return;
  std::string m = msg;
  // poppler-cpp prefixes "poppler/<category>: "; the category adds nothing for a reader.
  if (m.rfind("poppler/", 0) == 0) {
    size_t c = m.find(": ");
    if (c != std::string::npos) m = m.substr(c + 2);
  }
  while (!m.empty() && is_space_byte(static_cast<unsigned char>(m.back()))) m.pop_back();
  if (!m.empty()) g_poppler_errors->push_back(std::move(m));
}

// Valid UTF-8 with line ends as "\n", page breaks as paragraph breaks, other control characters
// and soft hyphens dropped, tabs as spaces and ligatures spelled out.
std::string normalize(std::string_view raw) {
  static const char* const kLigatures[] = {"ff", "fi", "fl", "ffi", "ffl", "st", "st"};  // U+FB00..FB06
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size();) {
    size_t n = utf8_sequence_length(raw, i);
    if (n == 0) {  // poppler gives valid UTF-8; a stray byte is dropped rather than trusted
      ++i;
      continue;
    }
    unsigned char c = static_cast<unsigned char>(raw[i]);
    if (n == 1) {
      if (c == '\r') {
        if (i + 1 >= raw.size() || raw[i + 1] != '\n') out += '\n';
      } else if (c == '\f') {
        out += "\n\n";
      } else if (c == '\t' || c == '\v') {
        out += ' ';
      } else if (c >= 0x20 || c == '\n') {
        out += static_cast<char>(c);
      }
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(raw[i + 1]) == 0xAD) {
      // soft hyphen: invisible unless at a line end, where it only marks a break
    } else if (n == 3 && c == 0xEF && static_cast<unsigned char>(raw[i + 1]) == 0xAC &&
               static_cast<unsigned char>(raw[i + 2]) <= 0x86) {
      out += kLigatures[static_cast<unsigned char>(raw[i + 2]) - 0x80];
    } else {
      out.append(raw.substr(i, n));
    }
    i += n;
  }
  return out;
}

// A poppler message as part of a reason: valid UTF-8 on one line, clipped (it may quote the file).
std::string reason_text(const std::string& msg) {
  std::string m = normalize(msg);
  for (auto& ch : m)
    if (ch == '\n') ch = ' ';
  return clip_input(m, 200);
}

bool all_of(std::string_view s, std::string_view set) {
  return !s.empty() && s.find_first_not_of(set) == std::string_view::npos;
}

// A block that is only a page number: "14", "xii", "Page 3", "- 7 -".
bool page_number_block(std::string_view b) {
  std::string s(trim_space(b));
  if (s.find('\n') != std::string::npos || s.size() > 16) return false;
  std::string lower = s;
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::string_view v = lower;
  if (v.rfind("page ", 0) == 0) v.remove_prefix(5);
  if (v.size() >= 2 && v.front() == '-' && v.back() == '-') v = trim_space(v.substr(1, v.size() - 2));
  if (all_of(v, "0123456789") && v.size() <= 5) return true;
  // Roman numerals (front matter); all one case in the original, so "Mix" is not one.
  std::string_view orig = trim_space(s);
  bool one_case = all_of(orig, "ivxlcdm") || all_of(orig, "IVXLCDM");
  return one_case && v.size() <= 6 && all_of(v, "ivxlcdm");
}

bool ends_sentence(std::string_view line) {
  while (!line.empty() && (line.back() == ')' || line.back() == '"' || line.back() == '\'')) line.remove_suffix(1);
  return !line.empty() && (line.back() == '.' || line.back() == '!' || line.back() == '?' || line.back() == ':');
}

bool ascii_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Dot leaders of a table of contents or an index ("Pipelines . . . . . . 10") become " … ": dozens
// of "." tokens a line are noise to both indexes. Sets *had when the line had one: such a line is
// an entry of its own, never joined to the next.
std::string collapse_leaders(std::string_view line, bool* had) {
  std::string out;
  for (size_t i = 0; i < line.size();) {
    if (line[i] == '.') {
      size_t j = i, dots = 0;
      while (j < line.size() && (line[j] == '.' || line[j] == ' ')) dots += line[j++] == '.';
      if (dots >= 4) {
        while (!out.empty() && out.back() == ' ') out.pop_back();
        out += j < line.size() ? " \u2026 " : " \u2026";
        *had = true;
        i = j;
        continue;
      }
      out.append(line.substr(i, j - i));
      i = j;
      continue;
    }
    out += line[i++];
  }
  return out;
}

// A title or a line as compared: trimmed, inner runs of spaces as one.
std::string heading_key(std::string_view s) {
  std::string out;
  for (char c : trim_space(s)) {
    if (is_space_byte(static_cast<unsigned char>(c))) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

// One text block (lines without a blank line between them) as paragraphs. Lines that are outline
// titles (`outline` non-null) are paragraphs of their own; their offsets in the result and outline
// entries are appended to *heads.
std::string tidy_block(const std::vector<std::string_view>& raw_lines, OutlineMatcher* outline,
                       std::vector<PdfHeading>* heads) {
  std::vector<std::string> lines(raw_lines.size());
  std::vector<bool> entry(raw_lines.size());
  std::vector<std::optional<size_t>> heading(raw_lines.size());
  for (size_t i = 0; i < raw_lines.size(); ++i) {
    bool had = false;
    lines[i] = collapse_leaders(raw_lines[i], &had);
    entry[i] = had;
    if (outline && !had) heading[i] = outline->match(lines[i]);
  }
  std::vector<size_t> len(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) len[i] = utf8_length(lines[i]);
  // The block's measure: the 80th percentile of its line lengths, so one overlong line (poppler
  // appends the rest of the next line after joining a hyphenated word) does not raise it.
  std::vector<size_t> sorted = len;
  std::sort(sorted.begin(), sorted.end());
  size_t measure = sorted[(sorted.size() - 1) * 4 / 5];
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i];
    if (heading[i]) heads->push_back({out.size(), *heading[i]});
    out.append(l);
    if (i + 1 == lines.size()) break;
    std::string_view next = lines[i + 1];
    const bool full = !entry[i] && !entry[i + 1] && measure >= 30 && len[i] * 4 >= measure * 3;
    if (heading[i] || heading[i + 1]) {
      out += "\n\n";  // a section heading is a paragraph of its own
    } else if (full && l.size() >= 2 && l.back() == '-' && ascii_letter(l[l.size() - 2]) && !next.empty() &&
        next[0] >= 'a' && next[0] <= 'z') {
      out.pop_back();  // "expres-" + "sion": a word split at the line end
    } else if (full) {
      out += ' ';  // a wrapped line of the same paragraph
    } else if (ends_sentence(l)) {
      out += "\n\n";  // a short line closing a sentence ends its paragraph
    } else {
      out += '\n';  // a heading, a code line, a list item: kept on its own line
    }
  }
  return out;
}

// The outline's entries in document order (depth first), each as its chain of titles. Bounded: a
// damaged or hostile outline cannot make this walk long.
void walk_outline(const poppler::toc_item* item, std::vector<std::string>* path,
                  std::vector<std::vector<std::string>>* out) {
  constexpr size_t kMaxEntries = 20000, kMaxDepth = 12;
  for (const poppler::toc_item* child : item->children()) {
    if (out->size() >= kMaxEntries) return;
    poppler::byte_array t = child->title().to_utf8();
    std::string title = heading_key(normalize(std::string_view(t.data(), t.size())));
    if (title.empty()) continue;
    path->push_back(std::move(title));
    out->push_back(*path);
    if (path->size() < kMaxDepth) walk_outline(child, path, out);
    path->pop_back();
  }
}

}  // namespace

OutlineMatcher::OutlineMatcher(std::vector<std::string> titles) : titles_(std::move(titles)) {}

namespace {

// A heading's number, as books print it before the title the outline gives without it: "3.5.4",
// "A.1", "2.", "IV", optionally after "Chapter" / "Appendix" / "Section" / "Part". The rest of
// `key` after it and one space; `key` itself when it has none.
std::string_view without_number(std::string_view key) {
  std::string_view v = key;
  for (std::string_view word : {"Chapter ", "Appendix ", "Section ", "Part "})
    if (v.substr(0, word.size()) == word) {
      v.remove_prefix(word.size());
      break;
    }
  size_t i = 0;
  auto alnum = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); };
  while (i < v.size() && i < 16 && (alnum(v[i]) || v[i] == '.')) ++i;
  if (i == 0 || i >= v.size() || v[i] != ' ') return key;
  std::string_view num = v.substr(0, i);
  // A number has a digit, or is one capital letter (an appendix) or a roman numeral.
  const bool digit = num.find_first_of("0123456789") != std::string_view::npos;
  const bool letter = num.size() <= 2 && num[0] >= 'A' && num[0] <= 'Z';
  const bool roman = num.find_first_not_of("IVXLC.") == std::string_view::npos;
  if (!digit && !letter && !roman) return key;
  return v.substr(i + 1);
}

}  // namespace

std::optional<size_t> OutlineMatcher::match(std::string_view line) {
  if (next_ >= titles_.size() || line.size() > 400) return std::nullopt;
  const std::string key = heading_key(line);
  const std::string_view bare = without_number(key);
  const size_t end = std::min(titles_.size(), next_ + kWindow);
  for (size_t i = next_; i < end; ++i) {
    if (titles_[i] == key || titles_[i] == bare) {
      next_ = i + 1;
      return i;
    }
  }
  return std::nullopt;
}

std::vector<std::vector<Section>> pdf_page_sections(const PdfText& pdf) {
  std::vector<std::vector<Section>> out(pdf.pages.size());
  const std::vector<std::string>* path = nullptr;  // the section in effect
  for (size_t p = 0; p < pdf.pages.size(); ++p) {
    const PdfPageText& page = pdf.pages[p];
    const uint64_t size = page.text.size();
    std::vector<Section>& secs = out[p];
    uint64_t first = page.headings.empty() ? size : page.headings.front().byte;
    if (path && first > 0) secs.push_back({*path, 0, first});
    for (size_t h = 0; h < page.headings.size(); ++h) {
      const PdfHeading& hd = page.headings[h];
      if (hd.entry >= pdf.outline.size()) continue;
      path = &pdf.outline[hd.entry];
      const uint64_t end = h + 1 < page.headings.size() ? page.headings[h + 1].byte : size;
      if (end > hd.byte) secs.push_back({*path, hd.byte, end});
    }
  }
  return out;
}

bool looks_like_pdf(std::string_view bytes) {
  std::string_view head = bytes.substr(0, 1024);
  size_t p = 0;
  if (head.substr(0, 3) == "\xEF\xBB\xBF") p = 3;
  while (p < head.size() && is_space_byte(static_cast<unsigned char>(head[p]))) ++p;
  if (head.substr(p, 5) == "%PDF-") return true;
  // Junk before the header is accepted only when it is binary (a wrapper such as MacBinary), so a
  // text file that merely mentions "%PDF-" stays text.
  size_t at = head.find("%PDF-");
  if (at == std::string_view::npos) return false;
  std::string_view before = head.substr(0, at);
  return before.find('\0') != std::string_view::npos || find_invalid_utf8(before) != std::string_view::npos;
}

std::string tidy_pdf_page_text(std::string_view raw, OutlineMatcher* outline, std::vector<PdfHeading>* headings) {
  std::string text = normalize(raw);
  // Blocks: runs of non-blank lines.
  std::vector<std::vector<std::string_view>> blocks(1);
  std::string_view all = text;
  size_t p = 0;
  while (p <= all.size()) {
    size_t e = all.find('\n', p);
    if (e == std::string_view::npos) e = all.size();
    std::string_view line = trim_space(all.substr(p, e - p));
    if (line.empty()) {
      if (!blocks.back().empty()) blocks.emplace_back();
    } else {
      blocks.back().push_back(line);
    }
    p = e + 1;
  }
  if (blocks.back().empty()) blocks.pop_back();
  std::vector<std::string> tidied;
  std::vector<std::vector<PdfHeading>> heads(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) tidied.push_back(tidy_block(blocks[i], outline, &heads[i]));
  // Running page numbers sit in the first or last two blocks of a page.
  for (size_t i = 0; i < tidied.size(); ++i) {
    if ((i < 2 || i + 2 >= tidied.size()) && page_number_block(tidied[i])) tidied[i].clear();
  }
  std::string out;
  for (size_t i = 0; i < tidied.size(); ++i) {
    if (tidied[i].empty()) continue;
    if (!out.empty()) out += "\n\n";
    if (headings)
      for (const PdfHeading& h : heads[i]) headings->push_back({out.size() + h.byte, h.entry});
    out += tidied[i];
  }
  return out;
}

Result<PdfText> pdf_to_text(std::string_view bytes) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return Status::InvalidArgument("PDF larger than 2 GiB");
  std::lock_guard<std::mutex> lock(pdf_mutex());
  static std::once_flag once;
  std::call_once(once, [] { poppler::set_debug_error_function(&on_poppler_error, nullptr); });
  std::vector<std::string> errors;
  g_poppler_errors = &errors;
  struct Reset {
    ~Reset() { g_poppler_errors = nullptr; }
  } reset;
  auto first_error = [&](const char* fallback) { return errors.empty() ? std::string(fallback) : reason_text(errors.front()); };

  // load_from_raw_data reads `bytes` in place (no copy); they outlive `doc`.
  std::unique_ptr<poppler::document> doc(
      poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size())));
  if (!doc) return Status::InvalidArgument("damaged PDF: " + first_error("poppler cannot open it"));
  // A file encrypted with an empty user password opens unlocked and is read like any other.
  if (doc->is_locked())
    return Status::InvalidArgument("encrypted PDF: it needs a password to open; decrypt it first (e.g. qpdf --decrypt)");
  PdfText out;
  out.page_count = doc->pages();
  if (out.page_count <= 0) return Status::InvalidArgument("damaged PDF: " + first_error("no pages"));
  {
    poppler::byte_array t = doc->get_title().to_utf8();
    std::string title = normalize(std::string_view(t.data(), t.size()));
    for (auto& ch : title)
      if (ch == '\n') ch = ' ';
    out.title = std::string(trim_space(title));
  }
  std::unique_ptr<poppler::toc> toc(doc->create_toc());
  if (toc && toc->root()) {
    std::vector<std::string> path;
    walk_outline(toc->root(), &path, &out.outline);
  }
  std::vector<std::string> titles;
  for (const auto& p : out.outline) titles.push_back(p.back());
  OutlineMatcher matcher(std::move(titles));
  for (int i = 0; i < out.page_count; ++i) {
    std::unique_ptr<poppler::page> page(doc->create_page(i));
    std::string text;
    std::vector<PdfHeading> headings;
    if (page) {
      poppler::byte_array raw = page->text(poppler::rectf(), poppler::page::non_raw_non_physical_layout).to_utf8();
      text = tidy_pdf_page_text(std::string_view(raw.data(), raw.size()), out.outline.empty() ? nullptr : &matcher,
                                &headings);
    }
    if (text.empty()) {
      ++out.empty_pages;
      continue;
    }
    out.pages.push_back({i + 1, std::move(text), std::move(headings)});
  }
  if (out.pages.empty()) {
    // A broken content stream also leaves pages blank; say so rather than blame the scan. poppler-cpp
    // reports warnings and errors alike, so the other explanation is named too.
    if (!errors.empty())
      return Status::InvalidArgument("damaged PDF: " + reason_text(errors.front()) +
                                     "; no page has text (if it opens elsewhere, it is image-only: OCR it first)");
    return Status::InvalidArgument("image-only PDF (no text layer): OCR it first (" + std::to_string(out.page_count) +
                                   (out.page_count == 1 ? " page" : " pages") + ", none with text)");
  }
  return out;
}

}  // namespace ragd::retrieval
