// Private to retrieval: what the readers of ZIP-packaged documents share (office_text.cpp,
// epub_text.cpp): a ZIP container read from memory (libzip), and expat with namespaces — element
// and attribute names arrive as "namespace|local".
// Thread-safety: a ZipArchive is used by one thread at a time; the functions are pure.
#pragma once

#include <expat.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>

#include "ragd/common/status.h"

struct zip;

namespace ragd::retrieval {

inline constexpr const char* kDublinCore = "http://purl.org/dc/elements/1.1/";
inline constexpr char kXmlNsSep = '|';

class ZipArchive {
 public:
  // Over `bytes`, which must outlive it. InvalidArgument "damaged ZIP container (why)".
  static Result<std::unique_ptr<ZipArchive>> open(std::string_view bytes);
  ~ZipArchive();
  ZipArchive(const ZipArchive&) = delete;
  ZipArchive& operator=(const ZipArchive&) = delete;

  bool has(const std::string& name) const;
  // The entry's bytes. NotFound when absent; InvalidArgument when it is encrypted, damaged or
  // larger than max_bytes once decompressed (checked as it is read: the directory's size can lie).
  Result<std::string> read(const std::string& name, uint64_t max_bytes) const;

 private:
  explicit ZipArchive(struct zip* za) : za_(za) {}
  struct zip* za_;
};

struct QName {
  std::string_view ns, local;
};
QName qname(const XML_Char* n);
// The value of attribute {ns}local, "" when absent.
std::string_view attribute(const XML_Char** atts, std::string_view ns, std::string_view local);

// Parses `xml` (named `part` in errors) with handler.start(QName, atts) / end(QName) /
// text(string_view). InvalidArgument "part: malformed XML at line N (why)".
template <class Handler>
Status parse_xml(std::string_view xml, const std::string& part, Handler& handler) {
  std::unique_ptr<std::remove_pointer_t<XML_Parser>, void (*)(XML_Parser)> p(XML_ParserCreateNS(nullptr, kXmlNsSep),
                                                                             XML_ParserFree);
  if (!p) return Status::Internal("cannot create an XML parser");
  XML_SetUserData(p.get(), &handler);
  XML_SetElementHandler(
      p.get(), [](void* h, const XML_Char* n, const XML_Char** a) { static_cast<Handler*>(h)->start(qname(n), a); },
      [](void* h, const XML_Char* n) { static_cast<Handler*>(h)->end(qname(n)); });
  XML_SetCharacterDataHandler(p.get(), [](void* h, const XML_Char* s, int len) {
    static_cast<Handler*>(h)->text(std::string_view(s, static_cast<size_t>(len)));
  });
  if (xml.size() > static_cast<size_t>(INT32_MAX)) return Status::InvalidArgument(part + " is too large");
  if (XML_Parse(p.get(), xml.data(), static_cast<int>(xml.size()), 1) != XML_STATUS_OK) {
    return Status::InvalidArgument(part + ": malformed XML at line " +
                                   std::to_string(XML_GetCurrentLineNumber(p.get())) + " (" +
                                   XML_ErrorString(XML_GetErrorCode(p.get())) + ")");
  }
  return Status::OK();
}

// Collects the text of the first dc:title (docx core properties, ODF meta.xml, an EPUB's OPF).
struct DcTitleHandler {
  int depth = 0;
  bool done = false;
  std::string title;
  void start(QName q, const XML_Char**) { depth += !done && q.ns == kDublinCore && q.local == "title"; }
  void end(QName q) {
    if (depth > 0 && q.ns == kDublinCore && q.local == "title") {
      --depth;
      done = true;
    }
  }
  void text(std::string_view s) {
    if (depth > 0) title += s;
  }
};

}  // namespace ragd::retrieval
