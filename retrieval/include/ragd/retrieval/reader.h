// Document readers: .txt/.text, .md/.markdown, .html/.htm (parsed with gumbo, the page's
// main content, block elements become paragraph breaks), .jsonl (one {"id","title","text"} record a
// line), and directories walked recursively (hidden entries skipped, symlinked directories not
// followed). Files that cannot become documents are skipped with a reason and counted, never
// fatal: binary data, invalid UTF-8, empty text, a line longer than max_line_bytes, a file larger
// than max_file_bytes, an unsupported extension, a malformed JSONL record.
// Thread-safety: free functions over their arguments; safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/retrieval/document.h"

namespace ragd::retrieval {

struct ReaderOptions {
  uint64_t max_file_bytes = 256ull << 20;  // larger files are skipped; default 256 MiB
  uint64_t max_line_bytes = 1ull << 20;    // a longer line skips the file (or JSONL record); 1 MiB
};

struct SkippedInput {
  std::string path;    // file path, or "path:line" for a JSONL record
  std::string reason;  // "binary file", "invalid UTF-8 at byte 17", "empty file", ...
};

struct InputFile {
  std::string path;  // absolute, lexically normal
  uint64_t bytes = 0;
  // The document id of this file: its path relative to the directory given (the file name for a
  // file given directly). Ids never carry server paths; they are shown to every client.
  std::string id;
};


// Expands files and directories into the list of readable files (sorted within each directory).
// A path that does not exist is an InvalidArgument error naming it; unsupported files found while
// walking a directory are appended to `skipped`.
Result<std::vector<InputFile>> list_input_files(const std::vector<std::string>& paths,
                                                std::vector<SkippedInput>* skipped);

struct ReadResult {
  std::vector<Document> documents;
  std::vector<SkippedInput> skipped;
};

// Gives the documents read from `f` ids (and sources) relative to the ingest root: a document
// whose id is `f.path` gets `f.id`, and a JSONL record named "PATH:LINE" gets "ID:LINE".
void relabel_documents(const InputFile& f, ReadResult* r);

// Reads one file by its extension. I/O errors (unreadable file) are reported as skipped too.
ReadResult read_input_file(const std::string& path, const ReaderOptions& opts = {});

// Same, from bytes already in memory; `path` picks the format and names the source.
ReadResult read_input_bytes(const std::string& path, std::string_view bytes, const ReaderOptions& opts = {});

// One heading's stretch of HtmlText::text: from the heading's own paragraph up to the next heading
// (or the end). `path` holds the enclosing headings' texts, outermost first ("json", "Basic Usage");
// text before the first heading is a section with an empty path. Sections tile the text in order.
struct HtmlSection {
  std::vector<std::string> path;
  size_t byte_begin = 0;  // offset into HtmlText::text
  size_t byte_end = 0;    // exclusive
};

// Text of an HTML page. Block elements become "\n\n", <br> becomes "\n", runs of whitespace
// collapse to one space (except inside <pre>); headings stay in `text` as their own paragraphs.
struct HtmlText {
  std::string title;    // <title>, whitespace-collapsed, as written (site suffix included)
  std::string heading;  // the page's top heading: the first of the highest level present (h1, else h2, ...)
  std::string text;
  std::vector<HtmlSection> sections;
};

struct HtmlOptions {
  // true: the page's main content only (see html_text.cpp for the rules: landmarks and hidden
  // elements removed, <main> / role="main" / a single <article> preferred, link-dense and
  // navigation blocks dropped; the plain visible text when the rules would leave no paragraph).
  // false: all visible text, as a browser's "select all" would copy it.
  bool main_content = true;
};
HtmlText html_to_text(std::string_view html, const HtmlOptions& opts = {});

}  // namespace ragd::retrieval
