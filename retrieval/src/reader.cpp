#include "ragd/retrieval/reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <simdjson.h>

#include "ragd/retrieval/text_util.h"

namespace fs = std::filesystem;

namespace ragd::retrieval {

namespace {

enum class Format { kText, kMarkdown, kHtml, kJsonl, kUnsupported };

Format format_of(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".txt" || ext == ".text") return Format::kText;
  if (ext == ".md" || ext == ".markdown") return Format::kMarkdown;
  if (ext == ".html" || ext == ".htm" || ext == ".xhtml") return Format::kHtml;
  if (ext == ".jsonl" || ext == ".ndjson") return Format::kJsonl;
  return Format::kUnsupported;
}

bool hidden(const fs::path& p) {
  std::string n = p.filename().string();
  return n.size() > 1 && n[0] == '.' && n != "..";
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space_byte(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && is_space_byte(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
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
  if (trim(bytes).empty()) return "empty file";
  return "";
}

std::string first_line_title(std::string_view text, bool markdown) {
  size_t p = 0;
  while (p < text.size()) {
    size_t e = text.find('\n', p);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = trim(text.substr(p, e - p));
    if (!line.empty()) {
      if (markdown) {
        if (line[0] != '#') return "";
        while (!line.empty() && line[0] == '#') line.remove_prefix(1);
        line = trim(line);
      }
      if (line.size() > 200) line = line.substr(0, utf8_floor(line, 200));
      return std::string(line);
    }
    p = e + 1;
  }
  return "";
}

void read_jsonl(const std::string& path, std::string_view bytes, const ReaderOptions& opts, ReadResult* r) {
  simdjson::dom::parser parser;
  size_t p = 0, line_no = 0;
  while (p < bytes.size()) {
    size_t e = bytes.find('\n', p);
    if (e == std::string_view::npos) e = bytes.size();
    ++line_no;
    std::string_view line = trim(bytes.substr(p, e - p));
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
    if (trim(d.text).empty()) {
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
    r->documents.push_back(std::move(d));
  }
  if (r->documents.empty() && r->skipped.empty()) r->skipped.push_back({path, "empty file"});
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
        skipped->push_back({path, "unsupported file type '" + de.path().extension().string() + "'"});
        continue;
      }
      found.push_back({path, de.file_size(ec), de.path().lexically_normal().lexically_relative(abs).string()});
    }
    std::sort(found.begin(), found.end(), [](const InputFile& a, const InputFile& b) { return a.path < b.path; });
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

void relabel_documents(const InputFile& f, ReadResult* r) {
  if (f.id.empty()) return;
  auto relabel = [&](std::string& s) {
    if (s == f.path) s = f.id;
    else if (s.size() > f.path.size() && s.compare(0, f.path.size(), f.path) == 0 && s[f.path.size()] == ':')
      s = f.id + s.substr(f.path.size());
  };
  for (auto& d : r->documents) {
    relabel(d.id);
    relabel(d.source);
  }
}

ReadResult read_input_bytes(const std::string& path, std::string_view bytes, const ReaderOptions& opts) {
  ReadResult r;
  Format f = format_of(path);
  if (f == Format::kJsonl) {
    // Records are checked one by one; a bad record does not sink the file.
    if (bytes.size() > opts.max_file_bytes || bytes.find('\0') != std::string_view::npos) {
      r.skipped.push_back({path, check_bytes(bytes, opts)});
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
    r.skipped.push_back({path, why});
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
  } else {
    d.text = std::string(bytes);
    d.title = first_line_title(d.text, f == Format::kMarkdown);
  }
  if (d.title.empty()) d.title = fs::path(path).filename().string();
  r.documents.push_back(std::move(d));
  return r;
}

ReadResult read_input_file(const std::string& path, const ReaderOptions& opts) {
  std::error_code ec;
  uint64_t size = fs::file_size(path, ec);
  if (ec) return ReadResult{{}, {{path, "cannot stat: " + ec.message()}}};
  if (size > opts.max_file_bytes)
    return ReadResult{{}, {{path, "file larger than max_file_bytes (" + std::to_string(size) + " > " +
                                      std::to_string(opts.max_file_bytes) + ")"}}};
  std::ifstream in(path, std::ios::binary);
  if (!in) return ReadResult{{}, {{path, "cannot open for reading"}}};
  std::string bytes(size, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) return ReadResult{{}, {{path, "read error"}}};
  return read_input_bytes(path, bytes, opts);
}

}  // namespace ragd::retrieval
