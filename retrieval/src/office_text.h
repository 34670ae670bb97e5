// Private to retrieval: the text of word-processor documents — Office Open XML (.docx: Word,
// LibreOffice, pandoc) and OpenDocument text (.odt, .ott) — from the ZIP container (libzip) and
// its XML (expat). Paragraphs become paragraphs separated by blank lines, a table's rows become
// lines of cells separated by " | ", tabs and line breaks are kept as a space and a newline;
// headings (docx: paragraph styles whose name is "heading N" or that carry an outline level,
// resolved through styles.xml; odt: <text:h> and its outline level) stay in the text as their own
// paragraphs and cut it into sections with the enclosing headings as the path. Deleted revisions,
// field codes, comments and footnotes are left out. Title: the document's properties (dc:title),
// else its Title-styled paragraph (docx), else its first heading.
// Limits: an XML part larger than `max_bytes` once decompressed is refused (a ZIP bomb stops
// there), and so is an encrypted entry.
// Thread-safety: free functions over their arguments.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/retrieval/document.h"

namespace ragd::retrieval {

enum class OfficeKind { kNone, kDocx, kOdt };

// By the container's first bytes (a ZIP local header naming "[Content_Types].xml" or "word/", or
// an ODF "mimetype" entry of a text document) or, for a ZIP, the name's extension (.docx, .odt,
// .ott). kNone for anything else, including other Office and ODF kinds (spreadsheets,
// presentations).
OfficeKind office_kind_of_head(std::string_view head, const std::string& name);

struct OfficeText {
  OfficeKind kind = OfficeKind::kNone;
  std::string title;  // "" when the document names none
  std::string text;
  std::vector<Section> sections;
};

// The document in `bytes` (a whole ZIP container). InvalidArgument with the reason a user can act
// on: not a ZIP container or a damaged one, not a word-processor document (an .xlsx, a .pptx, an
// .ods), an encrypted part, a part over `max_bytes`, malformed XML (with its line).
Result<OfficeText> office_to_text(std::string_view bytes, uint64_t max_bytes);

}  // namespace ragd::retrieval
