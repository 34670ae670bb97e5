// Word-processor documents (.docx, .odt) and EPUB books: office_text.cpp, epub_text.cpp and the
// reader around them. Containers are
// built here with libzip (what a word processor writes, part by part), and, where the machine has
// pandoc-data, from the reference documents pandoc ships.
#include <gtest/gtest.h>
#include <zip.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "epub_text.h"
#include "office_text.h"
#include "ragd/retrieval/reader.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::TempDir;

struct Part {
  std::string name, bytes;
  bool store = false;  // uncompressed (an ODF package's mimetype)
};

// A ZIP container of `parts`, in order, written to `path`; its bytes.
std::string make_zip(const std::string& path, const std::vector<Part>& parts) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  int err = 0;
  zip_t* za = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &err);
  EXPECT_NE(za, nullptr) << "zip_open " << err;
  for (const Part& p : parts) {
    zip_source_t* src = zip_source_buffer(za, p.bytes.data(), p.bytes.size(), 0);
    const zip_int64_t i = zip_file_add(za, p.name.c_str(), src, ZIP_FL_ENC_UTF_8);
    EXPECT_GE(i, 0) << zip_strerror(za);
    if (p.store) zip_set_file_compression(za, static_cast<zip_uint64_t>(i), ZIP_CM_STORE, 0);
  }
  EXPECT_EQ(zip_close(za), 0);
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every file under `dir` as parts (mimetype first and stored, as ODF requires).
std::vector<Part> parts_of_tree(const std::string& dir) {
  std::vector<Part> parts;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    Part p{std::filesystem::relative(e.path(), dir).string(), ss.str()};
    p.store = p.name == "mimetype";
    if (p.store) parts.insert(parts.begin(), p);
    else parts.push_back(p);
  }
  return parts;
}

constexpr const char* kW = R"(xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main")";

std::string docx_document(const std::string& body) {
  return std::string(R"(<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document )") + kW + "><w:body>" + body +
         "</w:body></w:document>";
}
std::string para(const std::string& style, const std::string& runs) {
  std::string p = "<w:p>";
  if (!style.empty()) p += R"(<w:pPr><w:pStyle w:val=")" + style + R"("/></w:pPr>)";
  return p + runs + "</w:p>";
}
std::string run(const std::string& text) { return R"(<w:r><w:t xml:space="preserve">)" + text + "</w:t></w:r>"; }

// A Dutch Word's styles: headings have localised ids ("Kop1"); the names say what they are.
const std::string kStyles = std::string(R"(<?xml version="1.0"?><w:styles )") + kW + ">" +
                            R"(<w:style w:type="paragraph" w:styleId="Titel"><w:name w:val="Title"/></w:style>)"
                            R"(<w:style w:type="paragraph" w:styleId="Kop1"><w:name w:val="heading 1"/></w:style>)"
                            R"(<w:style w:type="paragraph" w:styleId="Kop2"><w:name w:val="heading 2"/></w:style>)"
                            R"(<w:style w:type="paragraph" w:styleId="Eigen"><w:name w:val="Eigen kop"/><w:basedOn w:val="Kop2"/></w:style>)"
                            R"(<w:style w:type="paragraph" w:styleId="Heading1"><w:name w:val="Normal Indent"/></w:style>)"
                            "</w:styles>";

const std::string kCore = R"(<?xml version="1.0"?><cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Installation guide</dc:title></cp:coreProperties>)";

std::string sample_body() {
  return para("Titel", run("Widget installation")) + para("Kop1", run("Before you start")) +
         para("", run("You need ") + R"(<w:r><w:t>two</w:t></w:r>)" + run(" screws") +
              R"(<w:r><w:tab/><w:t>and</w:t><w:br/><w:t>a driver.</w:t></w:r>)") +
         // deleted revision and a field code: not shown
         para("", R"(<w:del><w:r><w:delText>old text</w:delText></w:r></w:del><w:r><w:instrText> PAGE </w:instrText></w:r>)" +
                      run("Kept.")) +
         para("Kop2", run("Tools")) +
         R"(<w:tbl><w:tr><w:tc>)" + para("", run("Tool")) + R"(</w:tc><w:tc>)" + para("", run("Size")) +
         R"(</w:tc></w:tr><w:tr><w:tc>)" + para("", run("Driver")) + R"(</w:tc><w:tc>)" + para("", run("PH2")) +
         R"(</w:tc></w:tr></w:tbl>)" + para("Eigen", run("Safety")) +
         // an explicit outline level beats the style; the "Heading1" id here is a body style
         R"(<w:p><w:pPr><w:pStyle w:val="Heading1"/><w:outlineLvl w:val="0"/></w:pPr>)" + run("Assembly") + "</w:p>" +
         para("Heading1", run("Screw the parts together."));
}

TEST(OfficeText, DocxParagraphsHeadingsTablesAndTitle) {
  TempDir d;
  const std::string bytes = make_zip(d / "guide.docx", {{"[Content_Types].xml", "<Types/>"},
                                                        {"word/document.xml", docx_document(sample_body())},
                                                        {"word/styles.xml", kStyles},
                                                        {"docProps/core.xml", kCore}});
  auto o = office_to_text(bytes, 1 << 20);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->kind, OfficeKind::kDocx);
  EXPECT_EQ(o->title, "Installation guide");
  EXPECT_EQ(o->text,
            "Widget installation\n\nBefore you start\n\nYou need two screws and\na driver.\n\nKept.\n\nTools\n\n"
            "Tool | Size\n\nDriver | PH2\n\nSafety\n\nAssembly\n\nScrew the parts together.");
  ASSERT_EQ(o->sections.size(), 4u);
  EXPECT_EQ(o->sections[0].path, std::vector<std::string>{"Before you start"});
  EXPECT_EQ(o->sections[1].path, (std::vector<std::string>{"Before you start", "Tools"}));
  EXPECT_EQ(o->sections[2].path, (std::vector<std::string>{"Before you start", "Safety"}));
  EXPECT_EQ(o->sections[3].path, std::vector<std::string>{"Assembly"});
  EXPECT_EQ(o->text.substr(o->sections[1].byte_begin, o->sections[1].byte_end - o->sections[1].byte_begin),
            "Tools\n\nTool | Size\n\nDriver | PH2\n\n");
  EXPECT_TRUE(sections_fit(o->sections, o->text.size()));

  // Without properties the Title paragraph names it; without styles.xml Word's built-in ids do.
  const std::string bare = make_zip(d / "bare.docx", {{"word/document.xml", docx_document(
      para("Title", run("Plain")) + para("Heading2", run("Only")) + para("", run("Body.")))}});
  auto b = office_to_text(bare, 1 << 20);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(b->title, "Plain");
  ASSERT_EQ(b->sections.size(), 1u);
  EXPECT_EQ(b->sections[0].path, std::vector<std::string>{"Only"});
}

TEST(OfficeText, OdtParagraphsHeadingsSpacesNotesAndTables) {
  TempDir d;
  const std::string ns =
      R"(xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0")";
  const std::string content =
      "<?xml version=\"1.0\"?><office:document-content " + ns + "><office:body><office:text>" +
      R"(<text:sequence-decls><text:sequence-decl text:name="Table"/></text:sequence-decls>)"
      R"(<text:h text:outline-level="1">Release notes</text:h>)"
      R"(<text:p>Version <text:span>2.0</text:span> adds<text:s text:c="3"/>speed.<text:note><text:note-citation>1</text:note-citation><text:note-body><text:p>A footnote.</text:p></text:note-body></text:note></text:p>)"
      R"(<text:h text:outline-level="2">Upgrading</text:h>)"
      "<text:p>Stop the\n  service<text:tab/>first.<text:line-break/>Then upgrade.</text:p>"
      R"(<table:table><table:table-row><table:table-cell><text:p>From</text:p></table:table-cell><table:table-cell><text:p>To</text:p></table:table-cell></table:table-row>)"
      R"(<table:table-row><table:table-cell><text:p>1.9</text:p></table:table-cell><table:table-cell><text:p>2.0</text:p></table:table-cell></table:table-row></table:table>)"
      "</office:text></office:body></office:document-content>";
  const std::string meta = R"(<?xml version="1.0"?><office:document-meta xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:dc="http://purl.org/dc/elements/1.1/"><office:meta><dc:title>Widget 2.0</dc:title></office:meta></office:document-meta>)";
  const std::string bytes = make_zip(d / "notes.odt", {{"mimetype", "application/vnd.oasis.opendocument.text", true},
                                                       {"content.xml", content},
                                                       {"meta.xml", meta}});
  EXPECT_EQ(office_kind_of_head(bytes.substr(0, 1024), "upload"), OfficeKind::kOdt);
  auto o = office_to_text(bytes, 1 << 20);
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->kind, OfficeKind::kOdt);
  EXPECT_EQ(o->title, "Widget 2.0");
  EXPECT_EQ(o->text, "Release notes\n\nVersion 2.0 adds speed.\n\nUpgrading\n\nStop the service first.\nThen upgrade.\n\n"
                     "From | To\n\n1.9 | 2.0");
  ASSERT_EQ(o->sections.size(), 2u);
  EXPECT_EQ(o->sections[1].path, (std::vector<std::string>{"Release notes", "Upgrading"}));
  EXPECT_TRUE(sections_fit(o->sections, o->text.size()));
}

TEST(OfficeText, BrokenAndForeignContainersSayWhat) {
  TempDir d;
  const std::string doc = make_zip(d / "a.docx", {{"word/document.xml", docx_document(para("", run("Hello.")))}});
  auto reason = [&](const std::string& bytes, uint64_t max = 1 << 20) {
    auto o = office_to_text(bytes, max);
    return o.ok() ? std::string("(read)") : o.status().to_string();
  };
  EXPECT_NE(reason(doc.substr(0, doc.size() - 30)).find("damaged ZIP container"), std::string::npos)
      << reason(doc.substr(0, doc.size() - 30));
  EXPECT_NE(reason("PK\x03\x04 not really"), "(read)");
  const std::string xlsx = make_zip(d / "b.xlsx", {{"xl/workbook.xml", "<workbook/>"}});
  EXPECT_NE(reason(xlsx).find("an Excel workbook (.xlsx)"), std::string::npos) << reason(xlsx);
  const std::string ods = make_zip(d / "c.ods", {{"mimetype", "application/vnd.oasis.opendocument.spreadsheet", true}});
  EXPECT_NE(reason(ods).find("application/vnd.oasis.opendocument.spreadsheet"), std::string::npos) << reason(ods);
  const std::string zip = make_zip(d / "d.zip", {{"readme.txt", "hi"}});
  EXPECT_NE(reason(zip).find("a ZIP archive, not a word-processor document"), std::string::npos);
  // 4 MB of text compresses to a few KB: the part's size stops it, not the file's.
  const std::string bomb = make_zip(d / "e.docx", {{"word/document.xml", docx_document(para("", run(std::string(4 << 20, 'a'))))}});
  ASSERT_LT(bomb.size(), 64u << 10);
  EXPECT_NE(reason(bomb, 1 << 20).find("word/document.xml is larger than max_file_bytes once decompressed"),
            std::string::npos)
      << reason(bomb, 1 << 20);
  const std::string bad = make_zip(d / "f.docx", {{"word/document.xml", docx_document("<w:p><w:r><w:t>open")}});
  EXPECT_NE(reason(bad).find("word/document.xml: malformed XML at line 1"), std::string::npos) << reason(bad);
}

TEST(Reader, WordProcessorDocumentsInADirectory) {
  TempDir d;
  make_zip(d / "docs/guide.docx", {{"[Content_Types].xml", "<Types/>"},
                                   {"word/document.xml", docx_document(sample_body())},
                                   {"word/styles.xml", kStyles},
                                   {"docProps/core.xml", kCore}});
  make_zip(d / "docs/sheet.xlsx", {{"xl/workbook.xml", "<workbook/>"}});
  make_zip(d / "docs/empty.odt", {{"mimetype", "application/vnd.oasis.opendocument.text", true},
                                  {"content.xml", R"(<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"/>)"}});
  std::ofstream(d / "docs/locked.docx", std::ios::binary)
      << std::string("\xD0\xCF\x11\xE0\xA1\xB1\x1A\xE1", 8) << std::string(512, '\x01');
  std::vector<SkippedInput> skipped;
  auto files = list_input_files({d / "docs"}, &skipped);
  ASSERT_TRUE(files.ok());
  std::vector<std::string> ids;
  for (const auto& f : *files) ids.push_back(f.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"empty.odt", "guide.docx", "locked.docx"}));
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_EQ(skipped[0].reason, "unsupported file type '.xlsx' (ZIP archive)");

  ReadResult g = read_input_file(d / "docs/guide.docx");
  ASSERT_EQ(g.documents.size(), 1u);
  EXPECT_EQ(g.documents[0].format, "docx");
  EXPECT_EQ(g.documents[0].title, "Installation guide");
  EXPECT_EQ(g.documents[0].sections.size(), 4u);
  ReadResult e = read_input_file(d / "docs/empty.odt");
  ASSERT_EQ(e.skipped.size(), 1u);
  EXPECT_EQ(e.skipped[0].reason, "no text in the document");
  EXPECT_EQ(e.skipped[0].kind, SkipKind::kRejected);
  ReadResult l = read_input_file(d / "docs/locked.docx");
  ASSERT_EQ(l.skipped.size(), 1u);
  EXPECT_NE(l.skipped[0].reason.find("an encrypted Office document"), std::string::npos);
  ReadResult x = read_input_file(d / "docs/sheet.xlsx");
  ASSERT_EQ(x.skipped.size(), 1u);
  EXPECT_EQ(x.skipped[0].kind, SkipKind::kUnsupported);
  EXPECT_NE(x.skipped[0].reason.find("unsupported format: an Excel workbook"), std::string::npos);
}

std::vector<Part> epub_parts() {
  const std::string container =
      R"(<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>)";
  const std::string opf =
      R"(<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>
  The Widget Book </dc:title></metadata><manifest>)"
      R"(<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>)"
      R"(<item id="c1" href="Text/chapter%201.xhtml" media-type="application/xhtml+xml"/>)"
      R"(<item id="c2" href="Text/../Text/two.xhtml#start" media-type="application/xhtml+xml"/>)"
      R"(<item id="notes" href="notes.xhtml" media-type="application/xhtml+xml"/>)"
      R"(<item id="cover" href="cover.svg" media-type="image/svg+xml"/>)"
      R"(</manifest><spine><itemref idref="cover"/><itemref idref="c1"/><itemref idref="c2"/><itemref idref="notes" linear="no"/></spine></package>)";
  auto page = [](const std::string& body) {
    return "<?xml version=\"1.0\"?><html xmlns=\"http://www.w3.org/1999/xhtml\"><head><title>t</title></head><body>" +
           body + "</body></html>";
  };
  return {{"mimetype", "application/epub+zip", true},
          {"META-INF/container.xml", container},
          {"OEBPS/content.opf", opf},
          {"OEBPS/nav.xhtml", page("<nav><ol><li><a href=\"Text/chapter%201.xhtml\">One</a></li></ol></nav>")},
          {"OEBPS/Text/chapter 1.xhtml", page("<h1>Getting started</h1><p>Unpack the widget.</p><h2>Parts</h2><p>Two screws.</p>")},
          {"OEBPS/Text/two.xhtml", page("<h1>Assembly</h1><p>Screw it together.</p>")},
          {"OEBPS/notes.xhtml", page("<p>Endnote text.</p>")},
          {"OEBPS/cover.svg", "<svg/>"}};
}

TEST(EpubText, ChaptersInSpineOrderWithTheirSections) {
  TempDir d;
  const std::string bytes = make_zip(d / "book.epub", epub_parts());
  EXPECT_TRUE(looks_like_epub(bytes.substr(0, 1024), "upload"));
  EXPECT_FALSE(looks_like_epub(make_zip(d / "x.zip", {{"a.txt", "a"}}).substr(0, 1024), "x.zip"));
  auto e = epub_to_text(bytes, 1 << 20);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ(e->title, "The Widget Book");
  EXPECT_EQ(e->chapters, 2);
  EXPECT_EQ(e->text, "Getting started\n\nUnpack the widget.\n\nParts\n\nTwo screws.\n\nAssembly\n\nScrew it together.");
  ASSERT_EQ(e->sections.size(), 3u);
  EXPECT_EQ(e->sections[1].path, (std::vector<std::string>{"Getting started", "Parts"}));
  EXPECT_EQ(e->sections[2].path, std::vector<std::string>{"Assembly"});
  EXPECT_EQ(e->text.substr(e->sections[2].byte_begin, e->sections[2].byte_end - e->sections[2].byte_begin),
            "Assembly\n\nScrew it together.");
  EXPECT_TRUE(sections_fit(e->sections, e->text.size()));

  ReadResult r = read_input_file(d / "book.epub");
  ASSERT_EQ(r.documents.size(), 1u);
  EXPECT_EQ(r.documents[0].format, "epub");
  EXPECT_EQ(r.documents[0].title, "The Widget Book");
}

TEST(EpubText, MissingPartsAreNamed) {
  TempDir d;
  auto without = [&](const std::string& name) {
    std::vector<Part> parts;
    for (auto& p : epub_parts())
      if (p.name != name) parts.push_back(p);
    auto e = epub_to_text(make_zip(d / "b.epub", parts), 1 << 20);
    return e.ok() ? std::string("(read)") : e.status().message();
  };
  EXPECT_EQ(without("META-INF/container.xml"), "not an EPUB book: META-INF/container.xml is missing");
  EXPECT_EQ(without("OEBPS/content.opf"), "the package document: OEBPS/content.opf is missing");
  EXPECT_EQ(without("OEBPS/Text/two.xhtml"), "chapter OEBPS/Text/two.xhtml: OEBPS/Text/two.xhtml is missing");
  std::vector<SkippedInput> skipped;
  make_zip(d / "dir/book.epub", epub_parts());
  auto files = list_input_files({d / "dir"}, &skipped);
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);
  EXPECT_TRUE(skipped.empty());
}

// pandoc's reference documents (Debian's pandoc-data), written by a word processor, zipped as
// they would be saved.
TEST(Reader, PandocReferenceDocuments) {
  const std::string docx_dir = "/usr/share/pandoc/data/docx", odt_dir = "/usr/share/pandoc/data/odt";
  if (!std::filesystem::exists(docx_dir + "/word/document.xml") || !std::filesystem::exists(odt_dir + "/content.xml"))
    GTEST_SKIP() << "pandoc-data is not installed here";
  TempDir d;
  make_zip(d / "reference.docx", parts_of_tree(docx_dir));
  ReadResult r = read_input_file(d / "reference.docx");
  ASSERT_EQ(r.documents.size(), 1u) << (r.skipped.empty() ? "" : r.skipped[0].reason);
  const Document& doc = r.documents[0];
  EXPECT_EQ(doc.format, "docx");
  EXPECT_EQ(doc.title, "Title");
  // Heading 1 .. Heading 9, each inside the one before.
  ASSERT_GE(doc.sections.size(), 9u);
  std::vector<std::string> nine;
  for (int i = 1; i <= 9; ++i) nine.push_back("Heading " + std::to_string(i));
  EXPECT_EQ(doc.sections[8].path, nine);
  EXPECT_NE(doc.text.find("Body Text. Body Text Char."), std::string::npos) << doc.text;
  EXPECT_NE(doc.text.find("Definition"), std::string::npos);

  make_zip(d / "reference.odt", parts_of_tree(odt_dir));
  ReadResult o = read_input_file(d / "reference.odt");
  ASSERT_EQ(o.documents.size(), 1u) << (o.skipped.empty() ? "" : o.skipped[0].reason);
  EXPECT_EQ(o.documents[0].format, "odt");
  EXPECT_FALSE(o.documents[0].text.empty());
}

}  // namespace
}  // namespace ragd::retrieval
