// PDF text through poppler-cpp, page by page, for the document readers (reader.cpp).
// Text is taken in poppler's non_raw_non_physical_layout, what `pdftotext` prints by default,
// chosen over the other two modes on real manuals (Debian's bashref.pdf, its two-column index):
// physical_layout pads with spaces to keep positions and so runs the columns of a two-column page
// together line by line ("! . . . 24   BASH . . . 79"); raw_order_layout follows the content
// stream, leaves words split by a line-end hyphen ("expres-" / "sion") and runs the page header
// into the page number with no break between text blocks. This mode keeps a column's text
// together, joins hyphenated words and separates text blocks with blank lines. Each page's text is
// then tidied for retrieval: wrapped lines of a paragraph joined with a space, a paragraph ending
// (a short line closing a sentence, or a gap between text blocks) kept as "\n\n", short lines such
// as code kept on their own lines, a page-number block at the top or bottom of a page dropped, the
// dot leaders of contents and index entries shortened to " … " (one entry a line), and the
// typographic ligatures (U+FB00..FB06) spelled out so "ﬁle" matches "file".
// Sections come from the PDF's outline (its bookmarks): the outline's titles are looked for, in
// outline order, as lines of the pages' text (a title is matched only among the next few entries
// after the last one found, so a contents page, whose lines carry " … N", or a stray line of the
// same words elsewhere does not take it); a matched line becomes a paragraph of its own and starts
// a section whose path is the entry's chain of titles. Text before a page's first heading belongs
// to the section in effect at the end of the previous page. A PDF without an outline, or whose
// outline titles are not printed as lines, has no sections.
// Failures are InvalidArgument with the reason a person can act on: "encrypted PDF ...",
// "damaged PDF: <what poppler said>", "image-only PDF (no text layer): OCR it first".
// Thread-safety: safe from any thread. Calls are serialized by one process-wide mutex: poppler's
// error callback (where the "damaged" reason comes from) is process-wide state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/retrieval/document.h"

namespace ragd::retrieval {

// A section heading found on a page: where its line starts in the page's text, and which outline
// entry it is (PdfText::outline).
struct PdfHeading {
  size_t byte = 0;
  size_t entry = 0;
};

struct PdfPageText {
  int number = 0;    // 1-based physical page number (not the printed label)
  std::string text;  // valid UTF-8, non-empty
  std::vector<PdfHeading> headings;  // in text order
};

struct PdfText {
  std::string title;               // the info dictionary's Title, trimmed; "" when it has none
  int page_count = 0;              // pages in the file
  int empty_pages = 0;             // pages without any text, left out of `pages`
  std::vector<PdfPageText> pages;  // the pages with text, in page order
  // The outline's entries in document order, each as its chain of titles from the top level
  // (e.g. {"3 Basic Shell Features", "3.5 Shell Expansions", "3.5.4 Command Substitution"}).
  std::vector<std::vector<std::string>> outline;
};

// Finds outline titles among a document's lines, in outline order (see above). Not thread-safe:
// one per document, fed its pages in order.
class OutlineMatcher {
 public:
  // `titles`: the outline entries' own titles, in document order, as normalized text.
  explicit OutlineMatcher(std::vector<std::string> titles);
  // The entry whose title `line` is, among the next kWindow entries not yet found; nullopt when
  // none. A match moves past it (entries skipped over are not looked for again).
  std::optional<size_t> match(std::string_view line);

  static constexpr size_t kWindow = 12;

 private:
  std::vector<std::string> titles_;
  size_t next_ = 0;
};

// True when `bytes` starts like a PDF file: "%PDF-" within the first 1024 bytes, the latitude
// PDF readers give (ISO 32000-1 Annex H.3: some writers put bytes before the header).
bool looks_like_pdf(std::string_view bytes);

// The text of every page. An error when the file cannot be opened (damaged), needs a password
// (encrypted), or has no text on any page (image-only: scanned pages).
Result<PdfText> pdf_to_text(std::string_view bytes);

// The tidying described above, on one page's text as poppler gives it. Exposed for tests. With a
// matcher, lines that are outline titles become paragraphs of their own, listed in *headings.
std::string tidy_pdf_page_text(std::string_view raw, OutlineMatcher* outline = nullptr,
                               std::vector<PdfHeading>* headings = nullptr);

// The sections of each page (Document::sections) from its headings: contiguous, the first one from
// byte 0 with the path in effect when the page starts (none before the first heading of the
// document). `pages` in page order.
std::vector<std::vector<Section>> pdf_page_sections(const PdfText& pdf);

}  // namespace ragd::retrieval
