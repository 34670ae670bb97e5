// Small PDFs written byte by byte for the reader tests: one Helvetica font, one content stream a
// page, a cross-reference table with the real offsets (so poppler reads them without repair).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace ragd::retrieval::testing {

struct PdfSpec {
  std::vector<std::string> pages;  // content streams, one a page
  std::string title;               // the info dictionary's Title; "" = no info dictionary
  // An /Encrypt dictionary (standard handler, RC4 40-bit) whose user password is not the empty
  // one: readers cannot open the file without a password.
  bool encrypted = false;
  // Top-level outline (bookmark) titles, in order; none = no /Outlines. Titles only, no
  // destinations: readers match them against the pages' lines.
  std::vector<std::string> outline;
};

// A content stream that writes `lines` of text top to bottom.
inline std::string pdf_text_page(const std::vector<std::string>& lines) {
  std::string s = "BT /F1 11 Tf 72 720 Td 14 TL";
  for (const auto& l : lines) s += " (" + l + ") Tj T*";
  return s + " ET";
}

// A content stream with only an image (a 2x2 grey inline image scaled up): a scanned page.
inline std::string pdf_image_page() {
  return std::string("q 200 0 0 200 72 500 cm BI /W 2 /H 2 /CS /G /BPC 8 ID ") + std::string("\x10\x80\x80\xF0", 4) +
         " EI Q";
}

inline std::string make_pdf(const PdfSpec& spec) {
  std::vector<std::string> objs;
  const size_t n = spec.pages.size();
  std::string kids;
  for (size_t i = 0; i < n; ++i) kids += (i ? " " : "") + std::to_string(4 + 2 * i) + " 0 R";
  // Outline objects go after the pages: the catalog refers to them by number.
  const size_t outline_root = spec.outline.empty() ? 0 : 3 + 2 * n + 1;
  objs.push_back(outline_root ? "<< /Type /Catalog /Pages 2 0 R /Outlines " + std::to_string(outline_root) + " 0 R >>"
                              : "<< /Type /Catalog /Pages 2 0 R >>");
  objs.push_back("<< /Type /Pages /Kids [" + kids + "] /Count " + std::to_string(n) + " >>");
  objs.push_back("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>");
  for (size_t i = 0; i < n; ++i) {
    objs.push_back("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
                   "/Contents " + std::to_string(5 + 2 * i) + " 0 R >>");
    objs.push_back("<< /Length " + std::to_string(spec.pages[i].size()) + " >>\nstream\n" + spec.pages[i] +
                   "\nendstream");
  }
  if (outline_root) {
    const size_t m = spec.outline.size();
    objs.push_back("<< /Type /Outlines /First " + std::to_string(outline_root + 1) + " 0 R /Last " +
                   std::to_string(outline_root + m) + " 0 R /Count " + std::to_string(m) + " >>");
    for (size_t i = 0; i < m; ++i) {
      std::string item = "<< /Title (" + spec.outline[i] + ") /Parent " + std::to_string(outline_root) + " 0 R";
      if (i > 0) item += " /Prev " + std::to_string(outline_root + i) + " 0 R";
      if (i + 1 < m) item += " /Next " + std::to_string(outline_root + i + 2) + " 0 R";
      objs.push_back(item + " >>");
    }
  }
  std::string trailer = "/Root 1 0 R";
  if (!spec.title.empty()) {
    objs.push_back("<< /Title (" + spec.title + ") >>");
    trailer += " /Info " + std::to_string(objs.size()) + " 0 R";
  }
  if (spec.encrypted) {
    objs.push_back("<< /Filter /Standard /V 1 /R 2 /O <" + std::string(64, '1') + "> /U <" + std::string(64, '2') +
                   "> /P -44 >>");
    trailer += " /Encrypt " + std::to_string(objs.size()) +
               " 0 R /ID [<0123456789abcdef0123456789abcdef> <0123456789abcdef0123456789abcdef>]";
  }
  std::string out = "%PDF-1.4\n%\xE2\xE3\xCF\xD3\n";
  std::vector<size_t> offsets;
  for (size_t i = 0; i < objs.size(); ++i) {
    offsets.push_back(out.size());
    out += std::to_string(i + 1) + " 0 obj\n" + objs[i] + "\nendobj\n";
  }
  const size_t xref = out.size();
  out += "xref\n0 " + std::to_string(objs.size() + 1) + "\n0000000000 65535 f \n";
  for (size_t off : offsets) {
    char line[32];
    std::snprintf(line, sizeof line, "%010zu 00000 n \n", off);
    out += line;
  }
  out += "trailer\n<< /Size " + std::to_string(objs.size() + 1) + " " + trailer + " >>\nstartxref\n" +
         std::to_string(xref) + "\n%%EOF\n";
  return out;
}

}  // namespace ragd::retrieval::testing
