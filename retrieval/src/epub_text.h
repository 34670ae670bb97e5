// Private to retrieval: the text of an EPUB book (EPUB 2 and 3): the container names the package
// document (OPF), whose spine orders the chapters; each chapter (XHTML) is read as an HTML page
// (html_to_text: main content, headings as sections) and the chapters follow one another in one
// document, their sections shifted to where each chapter starts. Chapters the spine marks
// linear="no" (notes, covers) are left out. Title: the package's dc:title, else the first
// chapter's.
// Thread-safety: free functions over their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/retrieval/document.h"

namespace ragd::retrieval {

// A ZIP whose first entry is the EPUB "mimetype" (by the head), or a ZIP named .epub.
bool looks_like_epub(std::string_view head, const std::string& name);

struct EpubText {
  std::string title;
  std::string text;
  std::vector<Section> sections;
  int chapters = 0;
};

// InvalidArgument naming what is wrong: a damaged container, a missing container.xml, package
// document or chapter, malformed XML, more than `max_bytes` of text or of one part.
Result<EpubText> epub_to_text(std::string_view bytes, uint64_t max_bytes);

}  // namespace ragd::retrieval
