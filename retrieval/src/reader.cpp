#include "ragd/retrieval/reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <simdjson.h>
#include <zlib.h>

#include "epub_text.h"
#include "man_text.h"
#include "office_text.h"
#include "pdf_text.h"
#include "ragd/common/echo.h"
#include "ragd/retrieval/text_util.h"

namespace fs = std::filesystem;

namespace ragd::retrieval {

namespace {

enum class Format { kText, kMarkdown, kHtml, kJsonl, kPdf, kMan, kUnsupported };

// The extensions each format is known by; the content can still overrule them (read_input_bytes).
struct FormatExtensions {
  Format format;
  const char* extensions[4];
};
constexpr FormatExtensions kFormats[] = {
    {Format::kText, {".txt", ".text"}},
    {Format::kMarkdown, {".md", ".markdown"}},
    {Format::kHtml, {".html", ".htm", ".xhtml"}},
    {Format::kJsonl, {".jsonl", ".ndjson"}},
    {Format::kPdf, {".pdf"}},
};

// The name's extension in lower case (".pdf"), "" without one.
std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext;
}

Format format_of(const std::string& path) {
  const std::string ext = lower_extension(path);
  for (const auto& f : kFormats)
    for (const char* e : f.extensions)
      if (e && ext == e) return f.format;
  return Format::kUnsupported;
}

// How many leading bytes the content checks look at.
constexpr size_t kSniffBytes = 1024;
// How much of a gzip file is read to decompress those bytes for the checks.
constexpr size_t kGzipSniffInput = 64 * 1024;

// A manual page's name: "ls.1", "Foo::Bar.3pm", "openssl-req.1ssl" (section digit, then up to five
// letters or digits).
std::string binary_kind(std::string_view b);  // below

bool man_extension(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext.size() < 2 || ext.size() > 7 || ext[1] < '1' || ext[1] > '9') return false;
  return std::all_of(ext.begin() + 2, ext.end(), [](unsigned char c) { return std::isalnum(c) != 0; });
}

bool office_extension(const std::string& path) {
  const std::string ext = lower_extension(path);
  return ext == ".docx" || ext == ".docm";
}

bool is_gzip(std::string_view b) { return b.size() >= 2 && b[0] == '\x1F' && b[1] == '\x8B'; }

// "README.md.gz" -> "README.md": the name the decompressed bytes are read by.
std::string without_gz(const std::string& path) {
  return lower_extension(path) == ".gz" ? path.substr(0, path.size() - 3) : path;
}

// The decompressed bytes of gzip data (every member, as gzip -d writes them). With head_only, the
// first `limit` bytes and no error for what follows (or for a cut-off stream); otherwise an error
// when they exceed `limit` (a decompression bomb stops there) or the data is damaged. *err says
// why ("" when fine).
std::string gunzip(std::string_view in, uint64_t limit, bool head_only, std::string* err) {
  err->clear();
  std::string out;
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    *err = "gzip: cannot start zlib";
    return {};
  }
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(std::min<size_t>(in.size(), UINT32_MAX));
  unsigned char buf[1 << 16];
  int rc = Z_OK;
  while (true) {
    zs.next_out = buf;
    zs.avail_out = sizeof buf;
    rc = inflate(&zs, Z_NO_FLUSH);
    out.append(reinterpret_cast<const char*>(buf), sizeof buf - zs.avail_out);
    if (out.size() > limit) {
      if (head_only) {
        out.resize(limit);
        break;
      }
      *err = "larger than max_file_bytes once decompressed (over " + std::to_string(limit) + " bytes)";
      break;
    }
    if (rc == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      if (inflateReset(&zs) != Z_OK) break;  // another gzip member follows
      continue;
    }
    if (rc == Z_BUF_ERROR && zs.avail_in == 0) {
      if (!head_only) *err = "damaged gzip data: the stream ends early";
      break;
    }
    if (rc != Z_OK) {
      if (!head_only || out.empty()) *err = std::string("damaged gzip data: ") + (zs.msg ? zs.msg : "zlib error " + std::to_string(rc));
      break;
    }
  }
  inflateEnd(&zs);
  return out;
}

// Plain text by its first bytes: no NUL, valid UTF-8 (a character cut at the end of the head
// allowed), not a known binary format.
bool looks_like_text(std::string_view head) {
  if (head.empty() || head.find('\0') != std::string_view::npos || !binary_kind(head).empty()) return false;
  std::string_view whole = head.substr(0, utf8_floor(head, head.size() >= 4 ? head.size() - 3 : head.size()));
  return find_invalid_utf8(whole) == std::string_view::npos;
}

// An HTML page by its first bytes: "<!DOCTYPE html" or "<html", possibly after a byte order mark,
// whitespace, an XML declaration or comments.
bool looks_like_html(std::string_view bytes) {
  std::string head(bytes.substr(0, kSniffBytes));
  std::transform(head.begin(), head.end(), head.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string_view h = head;
  if (h.substr(0, 3) == "\xEF\xBB\xBF") h.remove_prefix(3);
  size_t p = 0;
  while (p < h.size() && is_space_byte(static_cast<unsigned char>(h[p]))) ++p;
  h.remove_prefix(p);
  if (h.rfind("<!doctype html", 0) == 0 || h.rfind("<html", 0) == 0) return true;
  if (h.rfind("<?xml", 0) == 0 || h.rfind("<!--", 0) == 0) return h.find("<html") != std::string_view::npos;
  return false;
}

// Common binary formats by their magic bytes, to say what a file is when it is not read.
std::string binary_kind(std::string_view b) {
  struct Magic {
    std::string_view bytes;
    const char* name;
  };
  static constexpr Magic kMagic[] = {
      {"\x89PNG\r\n\x1a\n", "PNG image"},
      {"\xFF\xD8\xFF", "JPEG image"},
      {"GIF8", "GIF image"},
      {"PK\x03\x04", "ZIP archive"},
      {"\x1F\x8B", "gzip data"},
      {"\x7F" "ELF", "ELF executable"},
      {"\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", "OLE2 file (.doc, .xls, .ppt)"},
      {"{\\rtf", "RTF document"},
      {"%!PS", "PostScript"},
      {"\x28\xB5\x2F\xFD", "zstd data"},
      {"\xFD" "7zXZ", "xz data"},
  };
  for (const auto& m : kMagic)
    if (b.substr(0, m.bytes.size()) == m.bytes) return m.name;
  if (b.size() >= 4 && b.substr(0, 3) == "BZh" && b[3] >= '1' && b[3] <= '9') return "bzip2 data";
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "WEBP") return "WebP image";
  return "";
}

bool hidden(const fs::path& p) {
  std::string n = p.filename().string();
  return n.size() > 1 && n[0] == '.' && n != "..";
}

// Checks shared by every format. Returns the reason to skip, or "" when fine.
std::string check_bytes(std::string_view bytes, const ReaderOptions& opts) {
  if (bytes.size() > opts.max_file_bytes)
    return "file larger than max_file_bytes (" + std::to_string(bytes.size()) + " > " +
           std::to_string(opts.max_file_bytes) + ")";
  if (bytes.find('\0') != std::string_view::npos) return "binary file (NUL byte at offset " + std::to_string(bytes.find('\0')) + ")";
  if (size_t bad = find_invalid_utf8(bytes); bad != std::string_view::npos)
    return "invalid UTF-8 at byte " + std::to_string(bad);
  size_t line = 1, start = 0;
  for (size_t i = 0; i <= bytes.size(); ++i) {
    if (i == bytes.size() || bytes[i] == '\n') {
      if (i - start > opts.max_line_bytes)
        return "line " + std::to_string(line) + " longer than max_line_bytes (" + std::to_string(i - start) +
               " > " + std::to_string(opts.max_line_bytes) + ")";
      start = i + 1;
      ++line;
    }
  }
  if (trim_space(bytes).empty()) return "empty file";
  return "";
}

// Markdown's ATX headings ("# A", "## B ##", up to three spaces of indent; not inside ``` or ~~~
// fences) cut the text into sections: each from its heading line to the next heading line, its
// path the enclosing headings, outermost first. Text before the first heading is left to the
// chunker as a section without a path. Setext headings (underlined) are not recognised.
std::vector<Section> markdown_sections(std::string_view text) {
  std::vector<Section> out;
  std::vector<std::pair<int, std::string>> stack;  // (level, heading) of the open headings
  std::string_view fence;                           // the open code fence's marker, "" = none
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    size_t indent = 0;
    while (indent < line.size() && indent < 4 && line[indent] == ' ') ++indent;
    std::string_view body = line.substr(indent);
    if (indent < 4 && (body.rfind("```", 0) == 0 || body.rfind("~~~", 0) == 0)) {
      std::string_view marker = body.substr(0, 3);
      if (fence.empty()) fence = marker;
      else if (fence == marker) fence = {};
    } else if (fence.empty() && indent < 4 && !body.empty() && body[0] == '#') {
      int level = 0;
      while (level < static_cast<int>(body.size()) && body[level] == '#') ++level;
      if (level <= 6 && (static_cast<size_t>(level) == body.size() || body[level] == ' ' || body[level] == '\t')) {
        std::string_view h = trim_space(body.substr(level));
        while (!h.empty() && h.back() == '#') h.remove_suffix(1);  // closing sequence
        h = trim_space(h);
        if (!out.empty()) out.back().byte_end = pos;
        while (!stack.empty() && stack.back().first >= level) stack.pop_back();
        stack.emplace_back(level, std::string(h));
        Section sec;
        for (const auto& [lv, t] : stack)
          if (!t.empty()) sec.path.push_back(t);
        sec.byte_begin = pos;
        sec.byte_end = text.size();
        out.push_back(std::move(sec));
      }
    }
    pos = eol + 1;
  }
  return out;
}

std::string first_line_title(std::string_view text, bool markdown) {
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = trim_space(text.substr(p, e - p));
    if (!line.empty()) {
      if (markdown) {
        if (line[0] != '#') return "";
        while (!line.empty() && line[0] == '#') line.remove_prefix(1);
        line = trim_space(line);
      }
      if (line.size() > 200) line = line.substr(0, utf8_floor(line, 200));
      return std::string(line);
    }
    p = e + 1;
  }
  return "";
}

// A JSONL record's "metadata" into `out`, or the reason the record is rejected.
std::string read_metadata(simdjson::dom::element m, std::vector<std::pair<std::string, std::string>>* out) {
  simdjson::dom::object obj;
  if (m.get(obj)) return "field 'metadata' must be an object of string, number, bool or list values";
  auto scalar = [](simdjson::dom::element_type t) {
    using T = simdjson::dom::element_type;
    return t == T::STRING || t == T::INT64 || t == T::UINT64 || t == T::DOUBLE || t == T::BOOL;
  };
  // A cap keeps the duplicate check below cheap on a hostile 1 MiB record.
  constexpr size_t kMaxKeys = 256;
  if (obj.size() > kMaxKeys) return "field 'metadata' has more than " + std::to_string(kMaxKeys) + " keys";
  for (auto field : obj) {
    std::string key(field.key);
    std::string where = "metadata key '" + clip_input(key) + "'";
    if (key.empty()) return "field 'metadata' has an empty key";
    for (const auto& kv : *out)
      if (kv.first == key) return where + " appears twice";
    auto t = field.value.type();
    simdjson::dom::array list;
    if (!field.value.get(list)) {
      for (auto item : list)
        if (!scalar(item.type())) return where + ": a list may hold only strings, numbers and bools";
    } else if (!scalar(t)) {
      return where + " must be a string, number, bool or list of those, not " +
             (t == simdjson::dom::element_type::NULL_VALUE ? "null" : "an object");
    }
    out->emplace_back(std::move(key), simdjson::minify(field.value));
  }
  return "";
}

}  // namespace

std::string parse_metadata_json(std::string_view json, std::vector<std::pair<std::string, std::string>>* out) {
  simdjson::dom::parser parser;
  simdjson::dom::element el;
  if (auto err = parser.parse(json.data(), json.size(), true).get(el); err)
    return std::string("field 'metadata' is not valid JSON: ") + simdjson::error_message(err);
  return read_metadata(el, out);
}

namespace {

void read_jsonl(const std::string& path, std::string_view bytes, const ReaderOptions& opts, ReadResult* r) {
  simdjson::dom::parser parser;
  // Keys a record may have; any other is noted once per file (with its count and first line).
  static constexpr std::string_view kKnownKeys[] = {"id", "title", "text", "url", "metadata"};
  std::vector<std::pair<std::string, std::pair<size_t, size_t>>> unknown;  // key -> (records, first line)
  size_t p = 0, line_no = 0;
  while (p < bytes.size()) {
    size_t e = bytes.find('\n', p);
    if (e == std::string_view::npos) e = bytes.size();
    ++line_no;
    std::string_view line = trim_space(bytes.substr(p, e - p));
    p = e + 1;
    if (line.empty()) continue;
    std::string where = path + ":" + std::to_string(line_no);
    if (line.size() > opts.max_line_bytes) {
      r->skipped.push_back({where, "record longer than max_line_bytes"});
      continue;
    }
    simdjson::padded_string padded(line);
    simdjson::dom::element el;
    if (auto err = parser.parse(padded).get(el); err) {
      r->skipped.push_back({where, std::string("invalid JSON: ") + simdjson::error_message(err)});
      continue;
    }
    simdjson::dom::object obj;
    if (el.get(obj)) {
      r->skipped.push_back({where, "record is not a JSON object"});
      continue;
    }
    Document d;
    std::string_view sv;
    if (obj["text"].get(sv)) {
      r->skipped.push_back({where, "missing string field 'text'"});
      continue;
    }
    d.text = std::string(sv);
    if (trim_space(d.text).empty()) {
      r->skipped.push_back({where, "empty field 'text'"});
      continue;
    }
    auto id = obj["id"];
    int64_t iv;
    if (!id.get(sv)) d.id = std::string(sv);
    else if (!id.get(iv)) d.id = std::to_string(iv);
    else if (id.error() == simdjson::NO_SUCH_FIELD) d.id = where;
    else {
      r->skipped.push_back({where, "field 'id' must be a string or an integer"});
      continue;
    }
    if (d.id.empty()) {
      r->skipped.push_back({where, "empty field 'id'"});
      continue;
    }
    if (!obj["title"].get(sv)) d.title = std::string(sv);
    d.source = where;
    auto url = obj["url"];
    if (url.error() != simdjson::NO_SUCH_FIELD) {
      if (url.get(sv) || trim_space(sv).empty()) {
        r->skipped.push_back({where, "field 'url' must be a non-empty string"});
        continue;
      }
      d.source = std::string(sv);
      d.url = d.source;
    }
    d.format = "jsonl";
    auto meta = obj["metadata"];
    if (meta.error() != simdjson::NO_SUCH_FIELD) {
      if (std::string why = read_metadata(meta.value_unsafe(), &d.metadata); !why.empty()) {
        r->skipped.push_back({where, why});
        continue;
      }
    }
    for (auto field : obj) {
      if (std::find(std::begin(kKnownKeys), std::end(kKnownKeys), field.key) != std::end(kKnownKeys)) continue;
      auto it = std::find_if(unknown.begin(), unknown.end(), [&](const auto& u) { return u.first == field.key; });
      if (it != unknown.end()) ++it->second.first;
      else if (unknown.size() < 16) unknown.push_back({std::string(field.key), {1, line_no}});
    }
    r->documents.push_back(std::move(d));
  }
  if (r->documents.empty() && r->skipped.empty()) r->skipped.push_back({path, "empty file"});
  for (const auto& [key, n] : unknown)
    r->notes.push_back({path, "key '" + clip_input(key) + "' not read (" + std::to_string(n.first) +
                                  (n.first == 1 ? " record" : " records") + ", first on line " +
                                  std::to_string(n.second) + "); the keys read are id, title, text, url, metadata"});
}

// `name`: the file's name (without a .gz), the second clue for a manual page.
Format sniff_format(std::string_view head, const std::string& name) {
  if (looks_like_pdf(head)) return Format::kPdf;
  if (looks_like_html(head)) return Format::kHtml;
  if (looks_like_man(head, man_extension(name))) return Format::kMan;
  return Format::kUnsupported;
}

// A PDF cuts its text into pages wherever the page ends: an item whose heading closes one page is
// described on the next ("type [-afptP] [name ...]" at the foot of the Bash manual's page 70, what
// `type` does at the top of page 71). Each page's text therefore ends with the first words of the
// next page, marked "[page N]", up to kPdfContinuationBytes (cut at a space), so that the heading's
// page holds what it introduces. Chosen on the Bash manual's even-numbered questions (none / 300 /
// 800 bytes; the previous page's last words before a page's own, tried too, lowered them):
// docs/benchmarks.md.
constexpr size_t kPdfContinuationBytes = 300;

void append_continuation(const PdfPageText& next, std::string* text) {
  std::string_view nx = next.text;
  size_t n = utf8_floor(nx, std::min(nx.size(), kPdfContinuationBytes));
  if (n < nx.size()) {
    const size_t sp = nx.substr(0, n).find_last_of(" \n");
    if (sp != std::string_view::npos && sp > n / 2) n = sp;
  }
  while (n > 0 && is_space_byte(static_cast<unsigned char>(nx[n - 1]))) --n;
  if (n == 0) return;
  *text += "\n\n[page " + std::to_string(next.number) + "] ";
  text->append(nx.substr(0, n));
}

// One Document per page with text (see reader.h for ids and titles).
void read_pdf(const std::string& path, std::string_view bytes, ReadResult* r) {
  auto pdf = pdf_to_text(bytes);
  if (!pdf.ok()) {
    r->skipped.push_back({path, pdf.status().message()});
    return;
  }
  std::string base = pdf->title.empty() ? fs::path(path).filename().string() : pdf->title;
  if (base.size() > 200) base.resize(utf8_floor(base, 200));
  const std::vector<std::vector<Section>> sections = pdf_page_sections(*pdf);
  for (size_t i = 0; i < pdf->pages.size(); ++i) {
    PdfPageText& page = pdf->pages[i];
    Document d;
    d.id = path + "#page=" + std::to_string(page.number);
    d.source = d.id;
    d.title = base + " \u2014 page " + std::to_string(page.number);
    d.format = "pdf";
    d.page = static_cast<uint32_t>(page.number);
    d.text = std::move(page.text);
    d.sections = sections[i];
    if (i + 1 < pdf->pages.size()) append_continuation(pdf->pages[i + 1], &d.text);
    r->documents.push_back(std::move(d));
  }
  r->empty_pages += static_cast<uint64_t>(pdf->empty_pages);
}

// A file read as one document: id and source its path, its title (the file name when it names
// none, at most 200 bytes).
void push_whole_file(const std::string& path, const std::string& title, std::string text,
                     std::vector<Section> sections, const char* format, ReadResult* r) {
  Document d;
  d.id = path;
  d.source = path;
  d.title = title.empty() ? fs::path(path).filename().string() : title;
  if (d.title.size() > 200) d.title.resize(utf8_floor(d.title, 200));
  d.text = std::move(text);
  d.sections = std::move(sections);
  d.format = format;
  r->documents.push_back(std::move(d));
}

// A .docx / .odt (office_text.h): one document, headings as sections. Another kind of ZIP (a
// spreadsheet, a presentation, an archive) is unsupported; a broken one is rejected.
void read_office(const std::string& path, const std::string& name, std::string_view bytes, const ReaderOptions& opts,
                 ReadResult* r) {
  auto o = office_to_text(bytes, opts.max_file_bytes);
  if (!o.ok()) {
    // A broken container is a broken document only when its name or first entries say it is one;
    // otherwise it is a ZIP archive, which ragd does not read anyway.
    const bool claimed = office_kind_of_head(bytes.substr(0, kSniffBytes), name) != OfficeKind::kNone;
    if (!claimed && o.status().code() != StatusCode::kUnimplemented) {
      r->skipped.push_back({path, "unsupported format: ZIP archive", SkipKind::kUnsupported});
      return;
    }
    const bool unsupported = o.status().code() == StatusCode::kUnimplemented;
    r->skipped.push_back({path, (unsupported ? "unsupported format: " : "") + o.status().message(),
                          unsupported ? SkipKind::kUnsupported : SkipKind::kRejected});
    return;
  }
  if (o->text.empty()) {
    r->skipped.push_back({path, "no text in the document"});
    return;
  }
  push_whole_file(path, o->title, std::move(o->text), std::move(o->sections),
                  o->kind == OfficeKind::kOdt ? "odt" : "docx", r);
}

// An EPUB book (epub_text.h): one document, its chapters in spine order.
void read_epub(const std::string& path, std::string_view bytes, const ReaderOptions& opts, ReadResult* r) {
  auto e = epub_to_text(bytes, opts.max_file_bytes);
  if (!e.ok()) {
    r->skipped.push_back({path, e.status().message()});
    return;
  }
  if (e->text.empty()) {
    r->skipped.push_back({path, "no text in the book"});
    return;
  }
  push_whole_file(path, e->title, std::move(e->text), std::move(e->sections), "epub", r);
}

}  // namespace

Result<std::vector<InputFile>> list_input_files(const std::vector<std::string>& paths,
                                                std::vector<SkippedInput>* skipped) {
  std::vector<InputFile> out;
  for (const auto& p : paths) {
    std::error_code ec;
    fs::path abs = fs::absolute(p, ec).lexically_normal();
    if (ec) return Status::InvalidArgument(p + ": " + ec.message());
    auto st = fs::status(abs, ec);
    if (ec || !fs::exists(st)) return Status::InvalidArgument(p + ": no such file or directory");
    if (fs::is_regular_file(st)) {
      // An explicitly named file is read even without a known extension (as plain text).
      out.push_back({abs.string(), fs::file_size(abs, ec), abs.filename().string()});
      continue;
    }
    if (!fs::is_directory(st)) {
      skipped->push_back({abs.string(), "not a regular file or directory"});
      continue;
    }
    std::vector<InputFile> found;
    std::vector<SkippedInput> left_out;  // sorted like `found`, so runs list them the same way
    fs::recursive_directory_iterator it(abs, fs::directory_options::skip_permission_denied, ec), end;
    if (ec) return Status::InvalidArgument(p + ": " + ec.message());
    for (; it != end; it.increment(ec)) {
      if (ec) {
        skipped->push_back({abs.string(), "directory walk: " + ec.message()});
        break;
      }
      const fs::directory_entry& de = *it;
      if (hidden(de.path())) {
        if (de.is_directory(ec)) it.disable_recursion_pending();
        continue;
      }
      if (de.is_symlink(ec) && de.is_directory(ec)) {
        it.disable_recursion_pending();
        continue;
      }
      if (!de.is_regular_file(ec)) continue;
      std::string path = de.path().lexically_normal().string();
      if (format_of(path) == Format::kUnsupported) {
        // Content decides for an unknown extension: a PDF, an HTML page or a manual page is read
        // whatever its name, a file without an extension when it is text, and gzip data by what
        // it holds ("README.gz", "ls.1.gz", "changelog.Debian.gz").
        std::string head(kSniffBytes, '\0');
        std::ifstream in(path, std::ios::binary);
        in.read(head.data(), static_cast<std::streamsize>(head.size()));
        head.resize(static_cast<size_t>(in.gcount()));
        std::string name = path;
        bool gz = is_gzip(head);
        if (gz) {
          std::string packed(kGzipSniffInput, '\0');
          in.clear();
          in.seekg(0);
          in.read(packed.data(), static_cast<std::streamsize>(packed.size()));
          packed.resize(static_cast<size_t>(in.gcount()));
          std::string err;
          head = gunzip(packed, kSniffBytes, true, &err);
          name = without_gz(path);
          if (!err.empty()) head.clear();
        }
        // Compressed text is documentation whatever its inner name says (changelog.Debian.gz,
        // NEWS.gz); an uncompressed file with an unknown extension is not (style.css, app.js).
        const bool readable = (gz && head.empty()) ||  // empty or damaged: read_input_bytes says which
                              sniff_format(head, name) != Format::kUnsupported ||
                              office_kind_of_head(head, name) != OfficeKind::kNone || looks_like_epub(head, name) ||
                              (office_extension(name) && binary_kind(head).rfind("OLE2", 0) == 0) ||  // encrypted
                              (gz && format_of(name) != Format::kUnsupported) ||
                              ((gz || fs::path(name).extension().empty()) && looks_like_text(head));
        if (!readable) {
          std::string ext = de.path().extension().string();
          std::string why = ext.empty() ? "unsupported file type (no extension, not text)"
                                        : "unsupported file type '" + clip_input(ext) + "'";
          if (std::string kind = binary_kind(head); !kind.empty()) why += " (" + kind + ")";
          else if (gz) why += " (gzip data)";
          left_out.push_back({path, why, SkipKind::kUnsupported});
          continue;
        }
      }
      found.push_back({path, de.file_size(ec), de.path().lexically_normal().lexically_relative(abs).string()});
    }
    std::sort(found.begin(), found.end(), [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
    out.insert(out.end(), found.begin(), found.end());
    std::sort(left_out.begin(), left_out.end(),
              [](const SkippedInput& a, const SkippedInput& b) { return a.path < b.path; });
    skipped->insert(skipped->end(), left_out.begin(), left_out.end());
  }
  return out;
}

void relabel_documents(const InputFile& f, ReadResult* r) {
  if (f.id.empty()) return;
  auto relabel = [&](std::string& s) {
    if (s == f.path) s = f.id;
    else if (s.size() > f.path.size() && s.compare(0, f.path.size(), f.path) == 0 &&
             (s[f.path.size()] == ':' || s[f.path.size()] == '#'))
      s = f.id + s.substr(f.path.size());
  };
  for (auto& d : r->documents) {
    relabel(d.id);
    relabel(d.source);
  }
}

namespace {

// read_input_bytes after any decompression: `name` gives the format's second clue (a compressed
// file's name without its .gz), `path` names the documents.
ReadResult read_decoded(const std::string& path, const std::string& name, std::string_view bytes,
                        const ReaderOptions& opts) {
  ReadResult r;
  if (bytes.size() > opts.max_file_bytes) {
    r.skipped.push_back({path, check_bytes(bytes, opts)});
    return r;
  }
  // Content first: a PDF is a PDF whatever its name; a .pdf that is not one was mislabelled (and
  // used to be ingested as text); an HTML page saved as .txt or without an extension is HTML; roff
  // source of a manual page is a manual page.
  const Format by_name = format_of(name);
  const Format by_content = sniff_format(bytes.substr(0, kSniffBytes), name);
  if (by_content == Format::kPdf) {
    read_pdf(path, bytes, &r);
    return r;
  }
  if (by_name == Format::kPdf) {
    std::string why = "not a PDF (no %PDF- header)";
    if (std::string kind = binary_kind(bytes); !kind.empty()) why += ": " + kind;
    r.skipped.push_back({path, why});
    return r;
  }
  if (bytes.substr(0, 4) == std::string_view("PK\x03\x04", 4)) {
    if (looks_like_epub(bytes.substr(0, kSniffBytes), name)) read_epub(path, bytes, opts, &r);
    else read_office(path, name, bytes, opts, &r);
    return r;
  }
  if (binary_kind(bytes).rfind("OLE2", 0) == 0 && office_extension(name)) {
    r.skipped.push_back({path, "an encrypted Office document (a password-protected .docx is an OLE2 container): "
                               "remove the password to read it"});
    return r;
  }
  Format f = by_name;
  if ((by_content == Format::kHtml || by_content == Format::kMan) && (f == Format::kText || f == Format::kUnsupported))
    f = by_content;
  if (f == Format::kUnsupported) f = Format::kText;  // a file named directly is read as text
  if (std::string kind = binary_kind(bytes); !kind.empty()) {
    r.skipped.push_back({path, "unsupported format: " + kind, SkipKind::kUnsupported});
    return r;
  }
  if (f == Format::kJsonl) {
    // Records are checked one by one; a bad record does not sink the file.
    if (size_t nul = bytes.find('\0'); nul != std::string_view::npos) {
      r.skipped.push_back({path, "binary file (NUL byte at offset " + std::to_string(nul) + ")", SkipKind::kUnsupported});
      return r;
    }
    ReaderOptions o = opts;
    o.max_line_bytes = UINT64_MAX;  // per-record check in read_jsonl
    std::string why = check_bytes(bytes, o);
    if (!why.empty()) {
      r.skipped.push_back({path, why});
      return r;
    }
    read_jsonl(path, bytes, opts, &r);
    return r;
  }
  std::string why = check_bytes(bytes, opts);
  if (!why.empty()) {
    // Binary data in a text-named file is a format ragd does not read; the rest is a broken file.
    r.skipped.push_back({path, why, why.rfind("binary file", 0) == 0 ? SkipKind::kUnsupported : SkipKind::kRejected});
    return r;
  }
  Document d;
  d.id = path;
  d.source = path;
  if (f == Format::kHtml) {
    HtmlText h = html_to_text(bytes);
    if (h.text.empty()) {
      r.skipped.push_back({path, "no visible text in HTML"});
      return r;
    }
    d.title = std::move(h.title);
    d.text = std::move(h.text);
    d.format = "html";
    for (auto& sec : h.sections) d.sections.push_back(Section{std::move(sec.path), sec.byte_begin, sec.byte_end});
  } else if (f == Format::kMan) {
    ManText m = man_to_text(bytes);
    if (m.text.empty()) {
      if (!m.link.empty())
        r.notes.push_back({path, "a link to another manual page (.so " + clip_input(m.link) + "): nothing of its own to read"});
      else
        r.skipped.push_back({path, "no text in the manual page"});
      return r;
    }
    d.title = m.title();
    d.text = std::move(m.text);
    d.format = "man";
    d.sections = std::move(m.sections);
  } else {
    d.text = std::string(bytes);
    d.title = first_line_title(d.text, f == Format::kMarkdown);
    d.format = f == Format::kMarkdown ? "markdown" : "text";
    if (f == Format::kMarkdown) d.sections = markdown_sections(d.text);
  }
  if (d.title.empty()) d.title = fs::path(path).filename().string();
  r.documents.push_back(std::move(d));
  return r;
}

}  // namespace

ReadResult read_input_bytes(const std::string& path, std::string_view bytes, const ReaderOptions& opts) {
  if (!is_gzip(bytes)) return read_decoded(path, path, bytes, opts);
  // gzip data: read what it holds, by the name without the .gz (an archive in it, .tar.gz, is
  // refused by its content as any other binary data is).
  std::string err;
  std::string raw = gunzip(bytes, opts.max_file_bytes, false, &err);
  if (!err.empty()) {
    ReadResult r;
    r.skipped.push_back({path, err});
    return r;
  }
  return read_decoded(path, without_gz(path), raw, opts);
}

ReadResult read_input_file(const std::string& path, const ReaderOptions& opts) {
  auto skip = [&](std::string why) {
    ReadResult r;
    r.skipped.push_back({path, std::move(why)});
    return r;
  };
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  if (ec) return skip("cannot stat: " + ec.message());
  if (size > opts.max_file_bytes)
    return skip("file larger than max_file_bytes (" + std::to_string(size) + " > " + std::to_string(opts.max_file_bytes) + ")");
  std::ifstream in(path, std::ios::binary);
  if (!in) return skip("cannot open for reading");
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return skip("read error");
  return read_input_bytes(path, bytes, opts);
}

}  // namespace ragd::retrieval
