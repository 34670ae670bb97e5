// Document readers. A file's format is picked by its content first and its extension second:
//   - PDF: any file that starts "%PDF-", whatever its name, read through poppler (pdf_text.h). One
//     Document per page with text, so pages stay citable: id "<file id>#page=N" (N the 1-based
//     physical page, not the printed label), source "<path>#page=N", title "<the PDF's info Title,
//     else the file name> — page N". Pages without text are left out and counted
//     (ReadResult::empty_pages). Rejected with the reason: a .pdf without the header ("not a PDF (no
//     %PDF- header)"), an encrypted PDF, a damaged one, one with no text on any page ("image-only
//     PDF (no text layer): OCR it first").
//   - HTML: .html/.htm/.xhtml, and a .txt/.text or unknown-extension file whose first bytes are
//     HTML ("<!DOCTYPE html" or "<html", possibly after an XML declaration or a comment). Parsed with
//     gumbo (html_text.cpp): the page's main content, block elements become paragraph breaks, the
//     headings become Document::sections.
//   Every document says its format (Document::format); a PDF page its page (Document::page); a
//   JSONL record's "url" is its Document::url (and source).
//   - Markdown (.md/.markdown): sections by ATX heading (Document::sections; reader.cpp's
//     markdown_sections) and text (.txt/.text; a file named directly is read as text whatever
//     its extension, unless its content is PDF or HTML).
//   - JSONL (.jsonl/.ndjson): one record a line. "text" (string) is required; "id" a string or an
//     integer (default "PATH:LINE"); "title" a string; "url" a string, which becomes the
//     Document's source; "metadata" an object whose values are strings, numbers, bools or lists of
//     those, kept in Document::metadata (any other value rejects the record, naming the key). Other
//     keys are not read: each file gets one note naming them (ReadResult::notes), not an error.
// Directories are walked recursively (hidden entries skipped, symlinked directories not followed);
// a file with an unknown extension is included when its first bytes are PDF or HTML.
// Files and records that cannot become documents are skipped with a reason and counted, never
// fatal, in two kinds (SkipKind): unsupported (a format ragd does not read: an unknown extension,
// binary data such as an image or an archive) and rejected (a readable format, but this file or
// record is broken: a damaged, encrypted or image-only PDF, invalid UTF-8, empty text, a line longer
// than max_line_bytes, a file larger than max_file_bytes, a malformed JSONL record).
// Thread-safety: free functions over their arguments; safe from any thread (PDF reading is
// serialized process-wide, see pdf_text.h).
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

enum class SkipKind {
  kRejected,     // a readable format, but this file or record is broken
  kUnsupported,  // a format ragd does not read (`ragctl ingest --skip-unsupported` accepts these)
};

struct SkippedInput {
  std::string path;    // file path, or "path:line" for a JSONL record
  std::string reason;  // "binary file", "invalid UTF-8 at byte 17", "empty file", ...
  SkipKind kind = SkipKind::kRejected;
};

// Something a reader did not use but that did not stop the file: JSONL keys it does not read.
struct InputNote {
  std::string path;
  std::string note;
};

struct InputFile {
  std::string path;  // absolute, lexically normal
  uint64_t bytes = 0;
  // The document id of this file: its path relative to the directory given (the file name for a
  // file given directly). Ids never carry server paths; they are shown to every client.
  std::string id;
};


// Checks and reads a "metadata" JSON object (JSONL records, the document API): values strings,
// numbers, bools or lists of those, keys non-empty and distinct, at most 256. Appends (key, the
// value as minified JSON) to `out` in the object's order; returns "" on success, else the reason
// ("metadata key 'x' must be a string, number, bool or list of those, not an object").
std::string parse_metadata_json(std::string_view json, std::vector<std::pair<std::string, std::string>>* out);

// Expands files and directories into the list of readable files (sorted within each directory).
// A path that does not exist is an InvalidArgument error naming it; unsupported files found while
// walking a directory are appended to `skipped`.
Result<std::vector<InputFile>> list_input_files(const std::vector<std::string>& paths,
                                                std::vector<SkippedInput>* skipped);

struct ReadResult {
  std::vector<Document> documents;
  std::vector<SkippedInput> skipped;
  std::vector<InputNote> notes;
  uint64_t empty_pages = 0;  // PDF pages without text, left out
};

// Gives the documents read from `f` ids (and sources) relative to the ingest root: a document
// whose id is `f.path` gets `f.id`, a JSONL record named "PATH:LINE" gets "ID:LINE", and a PDF
// page "PATH#page=N" gets "ID#page=N".
void relabel_documents(const InputFile& f, ReadResult* r);

// Reads one file, its format picked by content and extension (above). I/O errors (unreadable
// file) are reported as skipped too.
ReadResult read_input_file(const std::string& path, const ReaderOptions& opts = {});

// Same, from bytes already in memory; `path` names the source and its extension is the format's
// second clue.
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
