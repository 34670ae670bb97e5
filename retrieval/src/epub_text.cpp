#include "epub_text.h"

#include <algorithm>
#include <unordered_map>

#include "ragd/retrieval/reader.h"
#include "ragd/retrieval/text_util.h"
#include "zip_xml.h"

namespace ragd::retrieval {

namespace {

constexpr const char* kContainerNs = "urn:oasis:names:tc:opendocument:xmlns:container";
constexpr const char* kOpfNs = "http://www.idpf.org/2007/opf";
constexpr std::string_view kZipMagic("PK\x03\x04", 4);

struct ContainerHandler {
  std::string rootfile;
  void start(QName q, const XML_Char** a) {
    if (rootfile.empty() && q.ns == kContainerNs && q.local == "rootfile") rootfile = std::string(attribute(a, "", "full-path"));
  }
  void end(QName) {}
  void text(std::string_view) {}
};

struct PackageHandler {
  DcTitleHandler title;
  std::unordered_map<std::string, std::pair<std::string, std::string>> manifest;  // id -> (href, media type)
  std::vector<std::string> spine;                                                  // idrefs, linear ones
  void start(QName q, const XML_Char** a) {
    title.start(q, a);
    if (q.ns != kOpfNs) return;
    if (q.local == "item") {
      manifest[std::string(attribute(a, "", "id"))] = {std::string(attribute(a, "", "href")),
                                                        std::string(attribute(a, "", "media-type"))};
    } else if (q.local == "itemref" && attribute(a, "", "linear") != "no") {
      spine.emplace_back(attribute(a, "", "idref"));
    }
  }
  void end(QName q) { title.end(q); }
  void text(std::string_view s) { title.text(s); }
};

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// An href of the package resolved against the package document's folder: percent-escapes
// decoded, a fragment dropped, "." and ".." segments applied (never above the container's root).
std::string resolve(const std::string& base_dir, std::string_view href) {
  href = href.substr(0, href.find('#'));
  std::string decoded;
  for (size_t i = 0; i < href.size(); ++i) {
    if (href[i] == '%' && i + 2 < href.size() && hex(href[i + 1]) >= 0 && hex(href[i + 2]) >= 0) {
      decoded += static_cast<char>(hex(href[i + 1]) * 16 + hex(href[i + 2]));
      i += 2;
    } else {
      decoded += href[i];
    }
  }
  std::vector<std::string> parts;
  auto push = [&](std::string_view path) {
    size_t p = 0;
    while (p <= path.size()) {
      size_t e = path.find('/', p);
      if (e == std::string_view::npos) e = path.size();
      std::string_view seg = path.substr(p, e - p);
      if (seg == "..") {
        if (!parts.empty()) parts.pop_back();
      } else if (!seg.empty() && seg != ".") {
        parts.emplace_back(seg);
      }
      p = e + 1;
    }
  };
  if (decoded.empty() || decoded[0] != '/') push(base_dir);
  push(decoded);
  std::string out;
  for (const auto& s : parts) out += (out.empty() ? "" : "/") + s;
  return out;
}

}  // namespace

bool looks_like_epub(std::string_view head, const std::string& name) {
  if (head.substr(0, 4) != kZipMagic) return false;
  std::string ext = name.size() >= 5 ? name.substr(name.size() - 5) : "";
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext == ".epub") return true;
  return head.size() > 38 && head.substr(30, 8) == "mimetype" &&
         head.substr(38, 20).find("application/epub+zip") != std::string_view::npos;
}

Result<EpubText> epub_to_text(std::string_view bytes, uint64_t max_bytes) {
  RAGD_ASSIGN_OR_RETURN(auto z, ZipArchive::open(bytes));
  auto container = z->read("META-INF/container.xml", max_bytes);
  if (!container.ok())
    return Status::InvalidArgument("not an EPUB book: " + container.status().message());
  ContainerHandler ch;
  RAGD_RETURN_IF_ERROR(parse_xml(*container, "META-INF/container.xml", ch));
  if (ch.rootfile.empty()) return Status::InvalidArgument("META-INF/container.xml names no package document");
  auto opf = z->read(ch.rootfile, max_bytes);
  if (!opf.ok()) return Status::InvalidArgument("the package document: " + opf.status().message());
  PackageHandler ph;
  RAGD_RETURN_IF_ERROR(parse_xml(*opf, ch.rootfile, ph));
  const size_t slash = ch.rootfile.rfind('/');
  const std::string base = slash == std::string::npos ? "" : ch.rootfile.substr(0, slash);

  EpubText out;
  std::string first_title;
  for (const std::string& idref : ph.spine) {
    auto it = ph.manifest.find(idref);
    if (it == ph.manifest.end())
      return Status::InvalidArgument(ch.rootfile + ": the spine names '" + idref + "', which the manifest lacks");
    const auto& [href, type] = it->second;
    if (type != "application/xhtml+xml" && type != "text/html") continue;  // an image or SVG page
    const std::string path = resolve(base, href);
    auto page = z->read(path, max_bytes);
    if (!page.ok()) return Status::InvalidArgument("chapter " + path + ": " + page.status().message());
    HtmlText h = html_to_text(*page);
    if (first_title.empty()) first_title = !h.title.empty() ? h.title : h.heading;
    if (h.text.empty()) continue;
    if (!out.text.empty()) out.text += "\n\n";
    const uint64_t at = out.text.size();
    if (at + h.text.size() > max_bytes)
      return Status::InvalidArgument("more than max_file_bytes of text (" + std::to_string(max_bytes) + ")");
    out.text += h.text;
    for (auto& s : h.sections) out.sections.push_back(Section{std::move(s.path), at + s.byte_begin, at + s.byte_end});
    ++out.chapters;
  }
  std::string t(trim_space(ph.title.title));
  std::replace(t.begin(), t.end(), '\n', ' ');
  out.title = !t.empty() ? t : first_title;
  return out;
}

}  // namespace ragd::retrieval
