// Document readers (retrieval/src/reader.cpp, html_text.cpp, pdf_text.cpp): the first input byte
// picks the file name the rest is read under (.html, .md, .jsonl, .txt, .htm, .markdown, .pdf, no
// extension, with bit 6 a manual page's name, .gz, .docx or .odt; the content can still make it PDF, HTML or a
// manual page, and gzip data is decompressed), and whether small reader limits apply (so the
// too-long-line and too-large paths are reached). HTML also goes straight through html_to_text,
// and everything through man_to_text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "../retrieval/src/man_text.h"
#include "ragd/retrieval/reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* const kNames[] = {"doc.html", "doc.md",  "corpus.jsonl", "notes.txt",
                                       "page.htm", "readme.markdown", "manual.pdf", "report"};
  const uint8_t sel = data[0];
  static const char* const kMore[] = {"page.1", "notes.gz", "report.docx", "notes.odt"};
  const std::string name = (sel & 0x40) ? kMore[sel & 3] : kNames[sel & 7];
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  ragd::retrieval::ReaderOptions opts;
  if (sel & 0x80) {
    opts.max_file_bytes = 512;
    opts.max_line_bytes = 64;
  }
  auto r = ragd::retrieval::read_input_bytes(name, bytes, opts);
  ragd::retrieval::InputFile f;
  f.path = "/data/in/" + name;
  f.id = "in/" + name;
  f.bytes = bytes.size();
  ragd::retrieval::relabel_documents(f, &r);
  if (name.find("htm") != std::string::npos) (void)ragd::retrieval::html_to_text(bytes);
  (void)ragd::retrieval::man_to_text(bytes);
  return 0;
}
