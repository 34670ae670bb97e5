// PDF ingestion through poppler (pdf_text.cpp) and format detection by content (reader.cpp):
// one document per page with text and page ids; encrypted, damaged, image-only and mislabelled
// PDFs rejected with their reason; PDF and HTML recognised whatever the file is called; JSONL url
// and metadata. The real-PDF test reads the Bash reference manual from Debian's bash-doc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "pdf_fixture.h"
#include "pdf_text.h"
#include "ragd/retrieval/reader.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::make_pdf;
using testing::pdf_image_page;
using testing::pdf_text_page;
using testing::PdfSpec;
using testing::TempDir;
using testing::write_file;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string two_page_pdf(const std::string& title = "Tiny Test") {
  PdfSpec spec;
  spec.pages = {pdf_text_page({"Hello from page one.", "Second line of the first page."}),
                pdf_text_page({"Page two talks about zebras."})};
  spec.title = title;
  return make_pdf(spec);
}

TEST(PdfReader, OneDocumentPerPageWithPageIds) {
  auto r = read_input_bytes("/data/in/tiny.pdf", two_page_pdf());
  ASSERT_TRUE(r.skipped.empty()) << r.skipped[0].reason;
  ASSERT_EQ(r.documents.size(), 2u);
  EXPECT_EQ(r.documents[0].id, "/data/in/tiny.pdf#page=1");
  EXPECT_EQ(r.documents[0].source, "/data/in/tiny.pdf#page=1");
  EXPECT_EQ(r.documents[0].title, "Tiny Test \u2014 page 1");
  EXPECT_TRUE(contains(r.documents[0].text, "Hello from page one.")) << r.documents[0].text;
  EXPECT_TRUE(contains(r.documents[0].text, "Second line of the first page.")) << r.documents[0].text;
  // A page ends with the first words of the next one, marked with its number; the last page with
  // nothing more.
  EXPECT_TRUE(r.documents[0].text.ends_with("\n\n[page 2] Page two talks about zebras.")) << r.documents[0].text;
  EXPECT_EQ(r.documents[1].id, "/data/in/tiny.pdf#page=2");
  EXPECT_EQ(r.documents[1].title, "Tiny Test \u2014 page 2");
  EXPECT_EQ(r.documents[0].page, 1u);
  EXPECT_EQ(r.documents[1].page, 2u);
  EXPECT_EQ(r.documents[1].format, "pdf");
  EXPECT_EQ(r.documents[1].text, "Page two talks about zebras.");
  EXPECT_EQ(r.empty_pages, 0u);

  // Ids relative to the ingest root keep the page.
  InputFile f{"/data/in/tiny.pdf", 0, "in/tiny.pdf"};
  relabel_documents(f, &r);
  EXPECT_EQ(r.documents[1].id, "in/tiny.pdf#page=2");
  EXPECT_EQ(r.documents[1].source, "in/tiny.pdf#page=2");
}

// The continuation is the next page's first words up to 300 bytes, cut at a space; the page's
// sections still lie within its own text.
TEST(PdfReader, APageEndsWithTheNextPagesFirstWords) {
  std::vector<std::string> lines;  // 20 lines of 7 words
  for (int l = 0; l < 20; ++l) {
    std::string line;
    for (int w = 0; w < 7; ++w) line += (w ? " word" : "word") + std::to_string(l * 7 + w);
    lines.push_back(line);
  }
  PdfSpec spec;
  spec.pages = {pdf_text_page({"The first page."}), pdf_text_page(lines)};
  auto r = read_input_bytes("/x/long.pdf", make_pdf(spec));
  ASSERT_EQ(r.documents.size(), 2u);
  const std::string& t = r.documents[0].text;
  const size_t at = t.find("\n\n[page 2] ");
  ASSERT_NE(at, std::string::npos) << t;
  const std::string cont = t.substr(at + 11);
  EXPECT_LE(cont.size(), 300u);
  EXPECT_GT(cont.size(), 150u);
  EXPECT_EQ(r.documents[1].text.rfind(cont, 0), 0u) << cont;                // the next page's start
  EXPECT_TRUE(std::isspace(static_cast<unsigned char>(r.documents[1].text[cont.size()]))) << cont;  // at a space
  EXPECT_TRUE(sections_fit(r.documents[0].sections, at));
}

TEST(PdfReader, TitleFallsBackToTheFileName) {
  auto r = read_input_bytes("/x/report.pdf", two_page_pdf(""));
  ASSERT_EQ(r.documents.size(), 2u);
  EXPECT_EQ(r.documents[0].title, "report.pdf \u2014 page 1");
}

TEST(PdfReader, PagesWithoutTextAreLeftOutAndCounted) {
  PdfSpec spec;
  spec.pages = {pdf_text_page({"Before the picture."}), pdf_image_page(), pdf_text_page({"After the picture."})};
  auto r = read_input_bytes("/x/mixed.pdf", make_pdf(spec));
  ASSERT_TRUE(r.skipped.empty()) << r.skipped[0].reason;
  ASSERT_EQ(r.documents.size(), 2u);
  EXPECT_EQ(r.documents[0].id, "/x/mixed.pdf#page=1");
  EXPECT_EQ(r.documents[1].id, "/x/mixed.pdf#page=3");  // physical page numbers, not positions
  EXPECT_EQ(r.documents[1].page, 3u);
  EXPECT_EQ(r.documents[1].text, "After the picture.");
  EXPECT_EQ(r.empty_pages, 1u);
}

TEST(PdfReader, ImageOnlyPdfIsRejected) {
  PdfSpec spec;
  spec.pages = {pdf_image_page(), pdf_image_page()};
  auto r = read_input_bytes("/x/scan.pdf", make_pdf(spec));
  EXPECT_TRUE(r.documents.empty());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].path, "/x/scan.pdf");
  EXPECT_EQ(r.skipped[0].kind, SkipKind::kRejected);
  EXPECT_TRUE(contains(r.skipped[0].reason, "image-only PDF (no text layer): OCR it first")) << r.skipped[0].reason;
  EXPECT_TRUE(contains(r.skipped[0].reason, "2 pages")) << r.skipped[0].reason;
}

TEST(PdfReader, EncryptedPdfIsRejected) {
  PdfSpec spec;
  spec.pages = {pdf_text_page({"Secret text."})};
  spec.encrypted = true;
  auto r = read_input_bytes("/x/locked.pdf", make_pdf(spec));
  EXPECT_TRUE(r.documents.empty());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].kind, SkipKind::kRejected);
  EXPECT_TRUE(contains(r.skipped[0].reason, "encrypted PDF")) << r.skipped[0].reason;
}

TEST(PdfReader, DamagedPdfIsRejectedWithPopplersReason) {
  const std::string pdf = two_page_pdf();
  for (const std::string& bytes : {pdf.substr(0, pdf.size() / 3), std::string("%PDF-1.4\n") + std::string(64, '\x01')}) {
    auto r = read_input_bytes("/x/broken.pdf", bytes);
    EXPECT_TRUE(r.documents.empty());
    ASSERT_EQ(r.skipped.size(), 1u);
    EXPECT_EQ(r.skipped[0].kind, SkipKind::kRejected);
    EXPECT_TRUE(contains(r.skipped[0].reason, "damaged PDF: ")) << r.skipped[0].reason;
    EXPECT_GT(r.skipped[0].reason.size(), std::string("damaged PDF: ").size());
  }
}

TEST(PdfReader, TextNamedPdfIsRejected) {
  // It used to be ingested as text.
  auto r = read_input_bytes("/x/fake.pdf", "This is plain text, saved with the wrong name.\n");
  EXPECT_TRUE(r.documents.empty());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].reason, "not a PDF (no %PDF- header)");
  EXPECT_EQ(r.skipped[0].kind, SkipKind::kRejected);
  auto png = read_input_bytes("/x/fake.pdf", std::string("\x89PNG\r\n\x1a\n\0\0", 10));
  ASSERT_EQ(png.skipped.size(), 1u);
  EXPECT_EQ(png.skipped[0].reason, "not a PDF (no %PDF- header): PNG image");
}

TEST(PdfReader, PdfIsRecognisedWhateverItsName) {
  for (const std::string name : {"/x/notes.txt", "/x/readme.md", "/x/report"}) {
    auto r = read_input_bytes(name, two_page_pdf());
    ASSERT_EQ(r.documents.size(), 2u) << name;
    EXPECT_EQ(r.documents[1].id, name + "#page=2");
    EXPECT_EQ(r.documents[1].text, "Page two talks about zebras.");
  }
}

TEST(PdfReader, DirectoryWalkRecognisesFilesByContent) {
  TempDir d;
  write_file(d / "a.pdf", two_page_pdf());
  write_file(d / "scan", two_page_pdf());                                    // PDF without an extension
  write_file(d / "saved_page", "<!DOCTYPE html><html><body><p>Hi</p></body></html>");  // HTML without one
  write_file(d / "photo.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  write_file(d / "Makefile", "all:\n\techo hi\n");                          // text without one: read as text
  write_file(d / "core", std::string("\x01\x00\x02\x03", 4));                   // binary without one
  std::vector<SkippedInput> skipped;
  auto files = list_input_files({d.path()}, &skipped);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::vector<std::string> ids;
  for (const auto& f : *files) ids.push_back(f.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"Makefile", "a.pdf", "saved_page", "scan"}));
  ASSERT_EQ(skipped.size(), 2u);
  EXPECT_TRUE(contains(skipped[0].path, "core"));
  EXPECT_EQ(skipped[0].reason, "unsupported file type (no extension, not text)");
  EXPECT_EQ(skipped[0].kind, SkipKind::kUnsupported);
  EXPECT_TRUE(contains(skipped[1].path, "photo.png"));
  EXPECT_EQ(skipped[1].reason, "unsupported file type '.png' (PNG image)");
  EXPECT_EQ(skipped[1].kind, SkipKind::kUnsupported);
}

TEST(Reader, HtmlIsRecognisedByContent) {
  const std::string page =
      "\n<!doctype HTML>\n<html><head><title>Saved Page</title></head><body><main><h1>Heading</h1>"
      "<p>The body paragraph that a reader should see.</p></main></body></html>";
  for (const std::string name : {"/x/page.txt", "/x/page"}) {
    auto r = read_input_bytes(name, page);
    ASSERT_EQ(r.documents.size(), 1u) << name;
    EXPECT_EQ(r.documents[0].title, "Saved Page");
    EXPECT_TRUE(contains(r.documents[0].text, "The body paragraph that a reader should see.")) << r.documents[0].text;
    EXPECT_FALSE(contains(r.documents[0].text, "<p>")) << r.documents[0].text;
  }
  // Markdown keeps its own format even when it starts with markup.
  auto md = read_input_bytes("/x/notes.md", "<html>\n# Not a page\n");
  ASSERT_EQ(md.documents.size(), 1u);
  EXPECT_TRUE(contains(md.documents[0].text, "<html>"));
}

TEST(Reader, KnownBinaryFormatsAreUnsupportedByName) {
  auto r = read_input_bytes("/x/archive.txt", std::string("PK\x03\x04\x14\0\0\0", 8));
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].kind, SkipKind::kUnsupported);
  EXPECT_TRUE(contains(r.skipped[0].reason, "ZIP archive")) << r.skipped[0].reason;
  auto bin = read_input_bytes("/x/blob.txt", std::string("abc\0def", 7));
  ASSERT_EQ(bin.skipped.size(), 1u);
  EXPECT_EQ(bin.skipped[0].kind, SkipKind::kUnsupported);
  auto bad = read_input_bytes("/x/latin1.txt", "caf\xE9");
  ASSERT_EQ(bad.skipped.size(), 1u);
  EXPECT_EQ(bad.skipped[0].kind, SkipKind::kRejected);  // text, but broken
}

TEST(Reader, JsonlUrlMetadataAndUnknownKeys) {
  std::string jl =
      "{\"id\":\"a\",\"text\":\"alpha\",\"url\":\"https://example.org/a\","
      "\"metadata\":{\"lang\":\"en\",\"year\":2021,\"draft\":false,\"tags\":[\"x\",1,true],\"score\":0.5}}\n"
      "{\"id\":\"b\",\"text\":\"beta\",\"metadata\":{\"nested\":{\"k\":1}}}\n"
      "{\"id\":\"c\",\"text\":\"gamma\",\"metadata\":[1,2]}\n"
      "{\"id\":\"d\",\"text\":\"delta\",\"metadata\":{\"tags\":[[1]]}}\n"
      "{\"id\":\"e\",\"text\":\"eps\",\"url\":7}\n"
      "{\"id\":\"f\",\"text\":\"phi\",\"author\":\"me\",\"lang\":\"en\"}\n"
      "{\"id\":\"g\",\"text\":\"chi\",\"author\":\"you\",\"metadata\":{\"m\":null}}\n";
  auto r = read_input_bytes("/x/recs.jsonl", jl);
  ASSERT_EQ(r.documents.size(), 2u);
  const Document& a = r.documents[0];
  EXPECT_EQ(a.source, "https://example.org/a");
  using KV = std::pair<std::string, std::string>;
  EXPECT_EQ(a.metadata, (std::vector<KV>{{"lang", "\"en\""}, {"year", "2021"}, {"draft", "false"},
                                          {"tags", "[\"x\",1,true]"}, {"score", "0.5"}}));
  EXPECT_EQ(r.documents[1].id, "f");
  EXPECT_EQ(r.documents[1].source, "/x/recs.jsonl:6");
  EXPECT_TRUE(r.documents[1].metadata.empty());
  ASSERT_EQ(r.skipped.size(), 5u);
  EXPECT_EQ(r.skipped[0].path, "/x/recs.jsonl:2");
  EXPECT_TRUE(contains(r.skipped[0].reason, "metadata key 'nested'")) << r.skipped[0].reason;
  EXPECT_TRUE(contains(r.skipped[1].reason, "field 'metadata' must be an object")) << r.skipped[1].reason;
  EXPECT_TRUE(contains(r.skipped[2].reason, "metadata key 'tags': a list may hold only")) << r.skipped[2].reason;
  EXPECT_TRUE(contains(r.skipped[3].reason, "field 'url'")) << r.skipped[3].reason;
  EXPECT_TRUE(contains(r.skipped[4].reason, "metadata key 'm'")) << r.skipped[4].reason;
  EXPECT_TRUE(contains(r.skipped[4].reason, "null")) << r.skipped[4].reason;
  // Keys not read are noted once per file, not per record, and not as errors.
  ASSERT_EQ(r.notes.size(), 2u);
  EXPECT_EQ(r.notes[0].path, "/x/recs.jsonl");
  // (record 7 has the key too, but it was rejected: only the records read count)
  EXPECT_TRUE(contains(r.notes[0].note, "key 'author' not read (1 record, first on line 6)")) << r.notes[0].note;
  EXPECT_TRUE(contains(r.notes[1].note, "key 'lang'")) << r.notes[1].note;
}

TEST(PdfText, TidyJoinsWrappedLinesKeepsShortOnesDropsPageNumbers) {
  const std::string raw =
      "Chapter 3: Basic Shell Features\n\n14\n\n"
      "The list of words following in is expanded, generating a list of items, and the\n"
      "set of expanded words is printed on the standard error output stream, each\n"
      "preceded by a number. The line read is saved in the variable\n"
      "REPLY.\n"
      "Here is an example that allows the user to pick a filename from the current\n"
      "directory, and shows the name of the ﬁle selected, and a hyphen-\n"
      "ated word split at a line end.\n"
      "select fname in *;\n"
      "do\n"
      "done\n";
  EXPECT_EQ(tidy_pdf_page_text(raw),
            "Chapter 3: Basic Shell Features\n\n"
            "The list of words following in is expanded, generating a list of items, and the set of expanded "
            "words is printed on the standard error output stream, each preceded by a number. The line read is "
            "saved in the variable REPLY.\n\n"
            "Here is an example that allows the user to pick a filename from the current directory, and shows the "
            "name of the file selected, and a hyphenated word split at a line end.\n\n"
            "select fname in *;\ndo\ndone");
}

TEST(PdfText, TidyShortensDotLeadersOneEntryALine) {
  const std::string raw =
      "Table of Contents\n\n"
      "3.2.3 Pipelines . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . . 10\n"
      "3.2.5 Compound Commands. . . . . . . . . . . . . . . . . . . . . . . . . . . . 11\n"
      "Version 1.2.3 of the tool . . .\n";
  EXPECT_EQ(tidy_pdf_page_text(raw),
            "Table of Contents\n\n3.2.3 Pipelines \u2026 10\n3.2.5 Compound Commands \u2026 11\n"
            "Version 1.2.3 of the tool . . .");
}

// The Bash Reference Manual as Debian 12's bash-doc (5.2.15) ships it: 196 pages; physical page 21
// (printed "15") holds the sentence below, wrapped over three lines (`pdftotext -f 21 -l 21`).
TEST(PdfOutline, MatcherFindsTitlesInOrderWithOrWithoutTheirNumbers) {
  OutlineMatcher m({"Introduction", "What is Bash?", "Shell Syntax", "Quoting", "Chapter Notes"});
  EXPECT_FALSE(m.match("Introduction \u2026 1").has_value());    // a contents line
  EXPECT_FALSE(m.match("An Introduction").has_value());           // a line that only contains it
  EXPECT_FALSE(m.match("Quoting is hard.").has_value());
  EXPECT_EQ(m.match("1 Introduction"), std::optional<size_t>(0));
  EXPECT_FALSE(m.match("Introduction").has_value());              // found already: not again
  EXPECT_EQ(m.match("  1.1   What is Bash? "), std::optional<size_t>(1));
  EXPECT_EQ(m.match("3.1.2 Quoting"), std::optional<size_t>(3));  // "Shell Syntax" skipped over
  EXPECT_FALSE(m.match("Shell Syntax").has_value());               // and not looked for again
  EXPECT_FALSE(m.match("3.1.2Quoting").has_value());
  EXPECT_EQ(m.match("Appendix B Chapter Notes"), std::optional<size_t>(4));
  // Beyond the window: an entry far ahead is not taken by a stray line.
  std::vector<std::string> many;
  for (int i = 0; i < 40; ++i) many.push_back("Entry " + std::to_string(i));
  OutlineMatcher w(many);
  const std::string far = "Entry " + std::to_string(OutlineMatcher::kWindow + 2);
  EXPECT_FALSE(w.match(far).has_value());  // entries 0 .. kWindow-1 are looked for
  EXPECT_EQ(w.match("Entry 2"), std::optional<size_t>(2));
  EXPECT_EQ(w.match(far), std::optional<size_t>(OutlineMatcher::kWindow + 2));  // now 3 .. kWindow+2
}

TEST(PdfOutline, PageSectionsCarryThePathAcrossPages) {
  PdfText pdf;
  pdf.outline = {{"A"}, {"A", "B"}, {"C"}};
  pdf.pages.push_back({1, "front matter", {}});
  pdf.pages.push_back({2, "xx\n\nA\n\nbody a\n\nB\n\nbody b", {{4, 0}, {13, 1}}});
  pdf.pages.push_back({3, "more of b", {}});
  pdf.pages.push_back({4, "C\n\nbody c", {{0, 2}}});
  const auto s = pdf_page_sections(pdf);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_TRUE(s[0].empty());  // before the first heading: no section
  ASSERT_EQ(s[1].size(), 2u);
  EXPECT_EQ(s[1][0].path, (std::vector<std::string>{"A"}));
  EXPECT_EQ(s[1][0].byte_begin, 4u);
  EXPECT_EQ(s[1][0].byte_end, 13u);
  EXPECT_EQ(s[1][1].path, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(s[1][1].byte_end, pdf.pages[1].text.size());
  ASSERT_EQ(s[2].size(), 1u);
  EXPECT_EQ(s[2][0].path, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(s[2][0].byte_begin, 0u);
  ASSERT_EQ(s[3].size(), 1u);
  EXPECT_EQ(s[3][0].path, (std::vector<std::string>{"C"}));
  for (size_t p = 0; p < s.size(); ++p) EXPECT_TRUE(sections_fit(s[p], pdf.pages[p].text.size()));
}

TEST(PdfReader, OutlineTitlesBecomeSectionsOfThePages) {
  PdfSpec spec;
  spec.pages = {pdf_text_page({"1 Introduction", "The tool reads files and writes reports for every run."}),
                pdf_text_page({"It keeps going after errors.", "2 Usage", "Run it with a file name."})};
  spec.outline = {"Introduction", "Usage"};
  auto r = read_input_bytes("guide.pdf", make_pdf(spec));
  ASSERT_TRUE(r.skipped.empty()) << r.skipped[0].reason;
  ASSERT_EQ(r.documents.size(), 2u);
  const Document& p1 = r.documents[0];
  ASSERT_EQ(p1.sections.size(), 1u);
  EXPECT_EQ(p1.sections[0].path, (std::vector<std::string>{"Introduction"}));
  EXPECT_EQ(p1.text.substr(p1.sections[0].byte_begin, 14), "1 Introduction");
  const Document& p2 = r.documents[1];
  ASSERT_EQ(p2.sections.size(), 2u) << p2.text;
  EXPECT_EQ(p2.sections[0].path, (std::vector<std::string>{"Introduction"}));
  EXPECT_EQ(p2.sections[0].byte_begin, 0u);
  EXPECT_EQ(p2.sections[1].path, (std::vector<std::string>{"Usage"}));
  EXPECT_EQ(p2.text.substr(p2.sections[1].byte_begin), "2 Usage\n\nRun it with a file name.");
  // Without an outline: no sections.
  spec.outline.clear();
  auto plain = read_input_bytes("guide.pdf", make_pdf(spec));
  ASSERT_EQ(plain.documents.size(), 2u);
  EXPECT_TRUE(plain.documents[0].sections.empty());
  EXPECT_TRUE(plain.documents[1].sections.empty());
}

TEST(PdfReader, RealManualFromDebianBashDoc) {
  const std::string path = "/usr/share/doc/bash/bashref.pdf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not installed (Debian package bash-doc)";
  auto r = read_input_file(path);
  ASSERT_TRUE(r.skipped.empty()) << r.skipped[0].reason;
  InputFile f{path, 0, "bashref.pdf"};
  relabel_documents(f, &r);
  ASSERT_FALSE(r.documents.empty());
  if (!contains(r.documents[0].text, "Edition 5.2, for Bash Version 5.2."))
    GTEST_SKIP() << "a bash-doc other than 5.2's: page numbers below do not apply";
  EXPECT_EQ(r.documents.size() + r.empty_pages, 196u);
  const std::string sentence =
      "This means every character in the quoted portion matches itself, instead of having any special pattern "
      "matching meaning.";
  std::vector<std::string> found;
  for (const auto& d : r.documents)
    if (contains(d.text, sentence)) found.push_back(d.id);
  EXPECT_EQ(found, (std::vector<std::string>{"bashref.pdf#page=21"}));
  for (const auto& d : r.documents) {
    if (d.id != "bashref.pdf#page=21") continue;
    EXPECT_EQ(d.title, "bashref.pdf \u2014 page 21");  // the manual's info dictionary has no Title
    EXPECT_EQ(d.source, "bashref.pdf#page=21");
    EXPECT_TRUE(d.text.rfind("Chapter 3: Basic Shell Features\n\n", 0) == 0) << d.text.substr(0, 200);
    EXPECT_FALSE(contains(d.text, "\n\n15\n\n")) << "the running page number stays out";
  }
  // Sections from the manual's outline: page 40 continues "Shell Parameter Expansion" and starts
  // "3.5.4 Command Substitution" on a line of its own.
  for (const auto& d : r.documents) {
    if (d.id != "bashref.pdf#page=40") continue;
    ASSERT_GE(d.sections.size(), 2u);
    EXPECT_EQ(d.sections[0].byte_begin, 0u);
    EXPECT_EQ(d.sections[0].path,
              (std::vector<std::string>{"Basic Shell Features", "Shell Expansions", "Shell Parameter Expansion"}));
    EXPECT_EQ(d.sections[1].path,
              (std::vector<std::string>{"Basic Shell Features", "Shell Expansions", "Command Substitution"}));
    EXPECT_EQ(d.text.substr(d.sections[1].byte_begin, 28), "3.5.4 Command Substitution\n\n");
  }
}

}  // namespace
}  // namespace ragd::retrieval
