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
// Failures are InvalidArgument with the reason a person can act on: "encrypted PDF ...",
// "damaged PDF: <what poppler said>", "image-only PDF (no text layer): OCR it first".
// Thread-safety: safe from any thread. Calls are serialized by one process-wide mutex: poppler's
// error callback (where the "damaged" reason comes from) is process-wide state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::retrieval {

struct PdfPageText {
  int number = 0;    // 1-based physical page number (not the printed label)
  std::string text;  // valid UTF-8, non-empty
};

struct PdfText {
  std::string title;               // the info dictionary's Title, trimmed; "" when it has none
  int page_count = 0;              // pages in the file
  int empty_pages = 0;             // pages without any text, left out of `pages`
  std::vector<PdfPageText> pages;  // the pages with text, in page order
};

// True when `bytes` starts like a PDF file: "%PDF-" within the first 1024 bytes, the latitude
// PDF readers give (ISO 32000-1 Annex H.3: some writers put bytes before the header).
bool looks_like_pdf(std::string_view bytes);

// The text of every page. An error when the file cannot be opened (damaged), needs a password
// (encrypted), or has no text on any page (image-only: scanned pages).
Result<PdfText> pdf_to_text(std::string_view bytes);

// The tidying described above, on one page's text as poppler gives it. Exposed for tests.
std::string tidy_pdf_page_text(std::string_view raw);

}  // namespace ragd::retrieval
