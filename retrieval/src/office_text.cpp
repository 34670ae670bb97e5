#include "office_text.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <type_traits>
#include <unordered_map>

#include "ragd/retrieval/text_util.h"
#include "zip_xml.h"

namespace ragd::retrieval {

namespace {

constexpr const char* kW = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
constexpr const char* kOdfText = "urn:oasis:names:tc:opendocument:xmlns:text:1.0";
constexpr const char* kOdfTable = "urn:oasis:names:tc:opendocument:xmlns:table:1.0";
constexpr const char* kOdfOffice = "urn:oasis:names:tc:opendocument:xmlns:office:1.0";
constexpr size_t kMaxHeadingBytes = 200;  // a section path element (a mis-styled long paragraph)

std::string lower(std::string_view s) {
  std::string o(s);
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char c) { return std::tolower(c); });
  return o;
}

// ---------------------------------------------------------------------------------------------
// Paragraphs, headings and sections, shared by both formats

// Whitespace as a word processor shows it: runs of spaces and tabs are one space, spaces around
// a line break go, the ends are trimmed.
std::string tidy(std::string_view raw) {
  std::string o;
  bool space = false;
  for (char c : raw) {
    if (c == '\r') continue;
    if (c == '\n') {
      while (!o.empty() && o.back() == ' ') o.pop_back();
      o += '\n';
      space = false;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\v' || c == '\f') {
      space = true;
      continue;
    }
    if (space && !o.empty() && o.back() != '\n') o += ' ';
    space = false;
    o += c;
  }
  while (!o.empty() && (o.back() == ' ' || o.back() == '\n')) o.pop_back();
  size_t b = 0;
  while (b < o.size() && o[b] == '\n') ++b;
  return o.substr(b);
}

class Builder {
 public:
  // A paragraph (level 0) or a heading of `level` (1 = outermost).
  void add(std::string_view raw, int level) {
    std::string p = tidy(raw);
    if (p.empty()) return;
    if (!out.text.empty()) out.text += "\n\n";
    if (level > 0) {
      if (!out.sections.empty()) out.sections.back().byte_end = out.text.size();
      std::string h = p;
      std::replace(h.begin(), h.end(), '\n', ' ');
      if (h.size() > kMaxHeadingBytes) h.resize(utf8_floor(h, kMaxHeadingBytes));
      while (!stack_.empty() && stack_.back().first >= level) stack_.pop_back();
      stack_.emplace_back(level, h);
      Section s;
      for (const auto& e : stack_) s.path.push_back(e.second);
      s.byte_begin = out.text.size();
      out.sections.push_back(std::move(s));
      if (first_heading.empty()) first_heading = h;
    }
    out.text += p;
  }
  // A table row: its cells' text as "cell | cell", a paragraph of its own; `cells` is emptied.
  void add_row(std::vector<std::string>& cells) {
    std::string line;
    for (const auto& c : cells) {
      if (!line.empty()) line += " | ";
      line += c;
    }
    add(line, 0);
    cells.clear();
  }
  OfficeText finish() {
    if (!out.sections.empty()) out.sections.back().byte_end = out.text.size();
    return std::move(out);
  }
  OfficeText out;
  std::string first_heading;

 private:
  std::vector<std::pair<int, std::string>> stack_;
};

std::string properties_title(const ZipArchive& z, const char* part, uint64_t max_bytes) {
  auto xml = z.read(part, max_bytes);
  if (!xml.ok()) return "";
  DcTitleHandler h;
  if (!parse_xml(*xml, part, h).ok()) return "";
  std::string t = tidy(h.title);
  std::replace(t.begin(), t.end(), '\n', ' ');
  return t;
}

// ---------------------------------------------------------------------------------------------
// Office Open XML (docx)

// Paragraph styles: id -> heading level (1-9), or 0 for a body style; the Title style's id.
struct DocxStyles {
  std::unordered_map<std::string, int> level;
  std::unordered_map<std::string, std::string> based_on;
  std::vector<std::string> title_ids;
  int level_of(const std::string& id) const {
    std::string at = id;
    for (int hop = 0; hop < 10 && !at.empty(); ++hop) {
      if (auto it = level.find(at); it != level.end() && it->second > 0) return it->second;
      auto b = based_on.find(at);
      at = b == based_on.end() ? "" : b->second;
    }
    if (level.count(id) != 0) return 0;  // a style of this document that is not a heading
    // Not in styles.xml (or none): Word's built-in ids ("Heading1") and LibreOffice's ("Heading 1").
    const std::string l = lower(id);
    if (l.rfind("heading", 0) == 0) {
      std::string_view rest = std::string_view(l).substr(7);
      while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
      if (rest.size() == 1 && rest[0] >= '1' && rest[0] <= '9') return rest[0] - '0';
    }
    return 0;
  }
  bool is_title(const std::string& id) const {
    return std::find(title_ids.begin(), title_ids.end(), id) != title_ids.end() || lower(id) == "title";
  }
};

struct StylesHandler {
  DocxStyles* s = nullptr;
  std::string id;
  bool paragraph_style = false;
  void start(QName q, const XML_Char** a) {
    if (q.ns != kW) return;
    if (q.local == "style") {
      id = std::string(attribute(a, kW, "styleId"));
      paragraph_style = attribute(a, kW, "type") == "paragraph";
      if (paragraph_style && !id.empty()) s->level.emplace(id, 0);  // defined here: its name decides
    } else if (!id.empty() && paragraph_style && q.local == "name") {
      const std::string n = lower(attribute(a, kW, "val"));
      if (n == "title") s->title_ids.push_back(id);
      if (n.size() == 9 && n.rfind("heading ", 0) == 0 && n[8] >= '1' && n[8] <= '9') s->level[id] = n[8] - '0';
    } else if (!id.empty() && paragraph_style && q.local == "outlineLvl") {
      const std::string_view v = attribute(a, kW, "val");
      if (v.size() == 1 && v[0] >= '0' && v[0] <= '8' && s->level[id] == 0) s->level[id] = v[0] - '0' + 1;
    } else if (!id.empty() && paragraph_style && q.local == "basedOn") {
      s->based_on[id] = std::string(attribute(a, kW, "val"));
    }
  }
  void end(QName q) {
    if (q.ns == kW && q.local == "style") id.clear();
  }
  void text(std::string_view) {}
};

struct DocxHandler {
  const DocxStyles* styles = nullptr;
  Builder* b = nullptr;
  std::string title_para;
  int p_depth = 0, r_depth = 0, tc_depth = 0;
  bool in_t = false;
  std::string t, para, style, cell;
  int outline = -1;
  std::vector<std::string> row;

  void start(QName q, const XML_Char** a) {
    if (q.ns != kW) return;
    const std::string_view l = q.local;
    if (l == "p") {
      if (p_depth++ == 0) {
        para.clear();
        style.clear();
        outline = -1;
      } else {
        para += ' ';  // a text box's paragraph inside this one
      }
    } else if (l == "pStyle" && p_depth == 1) {
      style = std::string(attribute(a, kW, "val"));
    } else if (l == "outlineLvl" && p_depth == 1) {
      const std::string_view v = attribute(a, kW, "val");
      if (v.size() == 1 && v[0] >= '0' && v[0] <= '8') outline = v[0] - '0';
    } else if (l == "r") {
      ++r_depth;
    } else if (l == "t" && r_depth > 0) {
      in_t = true;
      t.clear();
    } else if (r_depth > 0 && (l == "tab" || l == "ptab")) {
      para += '\t';
    } else if (r_depth > 0 && (l == "br" || l == "cr")) {
      para += '\n';
    } else if (r_depth > 0 && l == "noBreakHyphen") {
      para += '-';
    } else if (l == "tc") {
      if (tc_depth++ == 0) cell.clear();
    } else if (l == "tr" && tc_depth == 0) {
      row.clear();
    }
  }
  void end(QName q) {
    if (q.ns != kW) return;
    const std::string_view l = q.local;
    if (l == "t" && in_t) {
      in_t = false;
      // Line ends inside <w:t> are XML whitespace, not breaks (<w:br/> is one); spaces are tidied
      // per paragraph.
      for (char c : t) para += (c == '\n' || c == '\r') ? ' ' : c;
    } else if (l == "r") {
      r_depth -= r_depth > 0;
    } else if (l == "p" && p_depth > 0) {
      if (--p_depth > 0) return;
      if (tc_depth > 0) {
        if (!cell.empty()) cell += ' ';
        cell += para;
        return;
      }
      const int level = outline >= 0 ? outline + 1 : styles->level_of(style);
      if (level == 0 && styles->is_title(style) && title_para.empty()) title_para = tidy(para);
      b->add(para, level);
    } else if (l == "tc" && tc_depth > 0) {
      if (--tc_depth == 0) row.push_back(tidy(cell));
    } else if (l == "tr" && tc_depth == 0) {
      b->add_row(row);
    }
  }
  void text(std::string_view s) {
    if (in_t) t += s;
  }
};

Result<OfficeText> docx_text(const ZipArchive& z, uint64_t max_bytes) {
  DocxStyles styles;
  if (auto xml = z.read("word/styles.xml", max_bytes); xml.ok()) {
    StylesHandler sh;
    sh.s = &styles;
    RAGD_RETURN_IF_ERROR(parse_xml(*xml, "word/styles.xml", sh));
  } else if (xml.status().code() != StatusCode::kNotFound) {
    return xml.status();
  }
  RAGD_ASSIGN_OR_RETURN(std::string doc, z.read("word/document.xml", max_bytes));
  Builder b;
  DocxHandler h;
  h.styles = &styles;
  h.b = &b;
  RAGD_RETURN_IF_ERROR(parse_xml(doc, "word/document.xml", h));
  OfficeText out = b.finish();
  out.kind = OfficeKind::kDocx;
  out.title = properties_title(z, "docProps/core.xml", max_bytes);
  if (out.title.empty()) out.title = h.title_para;
  if (out.title.empty()) out.title = b.first_heading;
  return out;
}

// ---------------------------------------------------------------------------------------------
// OpenDocument text (odt)

struct OdtHandler {
  Builder* b = nullptr;
  int p_depth = 0, skip = 0, cell_depth = 0, level = 0;
  std::string para, cell;
  std::vector<std::string> row;

  static bool skipped(QName q) {
    return (q.ns == kOdfText && (q.local == "note" || q.local == "tracked-changes" || q.local == "sequence-decls")) ||
           (q.ns == kOdfOffice && q.local == "annotation");
  }
  void start(QName q, const XML_Char** a) {
    if (skipped(q) || skip > 0) {
      skip += skipped(q) || skip > 0;
      return;
    }
    if (q.ns == kOdfText && (q.local == "p" || q.local == "h")) {
      if (p_depth++ == 0) {
        para.clear();
        level = 0;
        if (q.local == "h") {
          const std::string_view v = attribute(a, kOdfText, "outline-level");
          level = 1;
          if (!v.empty() && v.size() <= 2 && std::all_of(v.begin(), v.end(), ::isdigit)) level = std::stoi(std::string(v));
          level = std::clamp(level, 1, 10);
        }
      } else {
        para += ' ';
      }
    } else if (q.ns == kOdfText && q.local == "s") {
      const std::string_view c = attribute(a, kOdfText, "c");
      int n = 1;
      if (!c.empty() && c.size() <= 3 && std::all_of(c.begin(), c.end(), ::isdigit)) n = std::stoi(std::string(c));
      para.append(static_cast<size_t>(std::max(1, n)), ' ');
    } else if (q.ns == kOdfText && q.local == "tab") {
      para += '\t';
    } else if (q.ns == kOdfText && q.local == "line-break") {
      para += '\n';
    } else if (q.ns == kOdfTable && q.local == "table-cell") {
      if (cell_depth++ == 0) cell.clear();
    } else if (q.ns == kOdfTable && q.local == "table-row" && cell_depth == 0) {
      row.clear();
    }
  }
  void end(QName q) {
    if (skip > 0) {
      --skip;
      return;
    }
    if (q.ns == kOdfText && (q.local == "p" || q.local == "h") && p_depth > 0) {
      if (--p_depth > 0) return;
      if (cell_depth > 0) {
        if (!cell.empty()) cell += ' ';
        cell += para;
        return;
      }
      b->add(para, level);
    } else if (q.ns == kOdfTable && q.local == "table-cell" && cell_depth > 0) {
      if (--cell_depth == 0) row.push_back(tidy(cell));
    } else if (q.ns == kOdfTable && q.local == "table-row" && cell_depth == 0) {
      b->add_row(row);
    }
  }
  void text(std::string_view s) {
    if (skip == 0 && p_depth > 0) {
      // ODF collapses whitespace in text content (text:s writes the spaces that count).
      for (char c : s) para += (c == '\n' || c == '\t' || c == '\r') ? ' ' : c;
    }
  }
};

Result<OfficeText> odt_text(const ZipArchive& z, uint64_t max_bytes) {
  RAGD_ASSIGN_OR_RETURN(std::string content, z.read("content.xml", max_bytes));
  Builder b;
  OdtHandler h;
  h.b = &b;
  RAGD_RETURN_IF_ERROR(parse_xml(content, "content.xml", h));
  OfficeText out = b.finish();
  out.kind = OfficeKind::kOdt;
  out.title = properties_title(z, "meta.xml", max_bytes);
  if (out.title.empty()) out.title = b.first_heading;
  return out;
}

}  // namespace

OfficeKind office_kind_of_head(std::string_view head, const std::string& name) {
  if (head.substr(0, 4) != std::string_view("PK\x03\x04", 4)) return OfficeKind::kNone;
  std::string ext = name;
  if (size_t dot = ext.rfind('.'); dot != std::string::npos && ext.find('/', dot) == std::string::npos)
    ext = lower(ext.substr(dot));
  else
    ext.clear();
  if (ext == ".docx" || ext == ".docm" || ext == ".dotx") return OfficeKind::kDocx;
  if (ext == ".odt" || ext == ".ott") return OfficeKind::kOdt;
  // An ODF package stores "mimetype" first and uncompressed: its value is in the head.
  if (head.size() > 38 && head.substr(30, 8) == "mimetype")
    return head.find("application/vnd.oasis.opendocument.text") != std::string_view::npos ? OfficeKind::kOdt
                                                                                          : OfficeKind::kNone;
  return head.find("word/") != std::string_view::npos ? OfficeKind::kDocx : OfficeKind::kNone;
}

Result<OfficeText> office_to_text(std::string_view bytes, uint64_t max_bytes) {
  if (bytes.substr(0, 4) != std::string_view("PK\x03\x04", 4))
    return Status::InvalidArgument("not a ZIP container (a .docx or .odt is one)");
  RAGD_ASSIGN_OR_RETURN(auto z, ZipArchive::open(bytes));
  if (z->has("word/document.xml")) return docx_text(*z, max_bytes);
  if (z->has("mimetype")) {
    RAGD_ASSIGN_OR_RETURN(std::string mt, z->read("mimetype", 256));
    mt = std::string(mt.substr(0, mt.find_first_of("\r\n")));
    if (mt.rfind("application/vnd.oasis.opendocument.text", 0) == 0) return odt_text(*z, max_bytes);
    if (mt == "application/epub+zip")  // epub_text.cpp reads the ones whose mimetype comes first, as EPUB requires
      return Status::InvalidArgument("an EPUB book whose mimetype is not its first entry");
    return Status::Unimplemented("an OpenDocument file of another kind (" + mt +
                                 "): word-processor documents are read, not spreadsheets or presentations");
  }
  if (z->has("xl/workbook.xml")) return Status::Unimplemented("an Excel workbook (.xlsx): word-processor documents are read");
  if (z->has("ppt/presentation.xml"))
    return Status::Unimplemented("a PowerPoint presentation (.pptx): word-processor documents are read");
  return Status::Unimplemented("a ZIP archive, not a word-processor document");
}

}  // namespace ragd::retrieval
