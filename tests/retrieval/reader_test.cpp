#include "ragd/retrieval/reader.h"

#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::TempDir;
using testing::write_file;

const SkippedInput* find_skip(const std::vector<SkippedInput>& v, const std::string& path_part) {
  for (const auto& s : v)
    if (s.path.find(path_part) != std::string::npos) return &s;
  return nullptr;
}

TEST(Reader, TextAndMarkdownTitles) {
  TempDir d;
  write_file(d / "a.txt", "\n  First line is the title\nBody text here.\n");
  write_file(d / "b.md", "# Markdown Heading\n\nSome *body*.\n");
  auto a = read_input_file(d / "a.txt");
  ASSERT_EQ(a.documents.size(), 1u);
  EXPECT_EQ(a.documents[0].title, "First line is the title");
  EXPECT_EQ(a.documents[0].id, d / "a.txt");
  EXPECT_EQ(a.documents[0].source, d / "a.txt");
  auto b = read_input_file(d / "b.md");
  ASSERT_EQ(b.documents.size(), 1u);
  EXPECT_EQ(b.documents[0].title, "Markdown Heading");
  EXPECT_EQ(b.documents[0].text, "# Markdown Heading\n\nSome *body*.\n");
}

// Markdown ATX headings become sections with their paths; '#' lines inside code fences do not.
TEST(Reader, MarkdownSectionsByHeading) {
  std::string md =
      "Intro before any heading.\n\n"
      "# Guide\n\nTop text.\n\n"
      "## Install ##\n\nRun it.\n\n```sh\n# not a heading\n```\n\n"
      "### From source\n\nBuild it.\n\n"
      "## Use\n\nCall it.\n"
      "####### seven hashes is text\n";
  auto r = read_input_bytes("/x/guide.md", md);
  ASSERT_EQ(r.documents.size(), 1u);
  const Document& d = r.documents[0];
  EXPECT_EQ(d.format, "markdown");
  ASSERT_EQ(d.sections.size(), 4u);
  using Path = std::vector<std::string>;
  EXPECT_EQ(d.sections[0].path, (Path{"Guide"}));
  EXPECT_EQ(d.sections[1].path, (Path{"Guide", "Install"}));
  EXPECT_EQ(d.sections[2].path, (Path{"Guide", "Install", "From source"}));
  EXPECT_EQ(d.sections[3].path, (Path{"Guide", "Use"}));
  EXPECT_EQ(d.sections[0].byte_begin, md.find("# Guide"));
  for (size_t i = 0; i + 1 < d.sections.size(); ++i) EXPECT_EQ(d.sections[i].byte_end, d.sections[i + 1].byte_begin);
  EXPECT_EQ(d.sections[3].byte_end, md.size());
  EXPECT_NE(md.substr(d.sections[1].byte_begin, d.sections[1].byte_end - d.sections[1].byte_begin).find("# not a heading"),
            std::string::npos);
}

// HTML headings become sections (the reader passes html_to_text's through) and the format is kept.
TEST(Reader, HtmlDocumentCarriesSections) {
  auto r = read_input_bytes("/x/p.html",
                            "<!DOCTYPE html><html><head><title>P</title></head><body><main><h1>Top</h1><p>a.</p>"
                            "<h2>Part</h2><p>b.</p></main></body></html>");
  ASSERT_EQ(r.documents.size(), 1u);
  const Document& d = r.documents[0];
  EXPECT_EQ(d.format, "html");
  ASSERT_FALSE(d.sections.empty());
  EXPECT_EQ(d.sections.back().path, (std::vector<std::string>{"Top", "Part"}));
  EXPECT_EQ(d.text.substr(d.sections.back().byte_begin, 4), "Part");
}

TEST(Reader, HtmlThroughParser) {
  auto h = html_to_text(
      "<!DOCTYPE html><html><head><title> The  Page </title><style>p{color:red}</style>"
      "<script>var x = '<p>not text</p>';</script></head><body><h1>Heading</h1>"
      "<p>First <b>bold</b>   paragraph &amp; entity.</p><div>Second<br>line</div>"
      "<ul><li>one</li><li>two</li></ul><pre>  keep   spaces</pre><p>Unclosed <i>tags</p></body></html>");
  EXPECT_EQ(h.title, "The Page");
  EXPECT_EQ(h.text,
            "Heading\n\nFirst bold paragraph & entity.\n\nSecond\nline\n\none\n\ntwo\n\n  keep   spaces\n\n"
            "Unclosed tags");
}

TEST(Reader, HtmlFileWithoutTextIsSkipped) {
  auto r = read_input_bytes("/x/empty.html", "<html><head><script>1</script></head><body> </body></html>");
  EXPECT_TRUE(r.documents.empty());
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].reason.find("no visible text"), std::string::npos);
}

TEST(Reader, JsonlRecordsAndBadRecords) {
  std::string jl =
      "{\"id\":\"r1\",\"title\":\"T1\",\"text\":\"alpha text\"}\n"
      "\n"
      "{\"id\":7,\"text\":\"numeric id\"}\n"
      "{\"title\":\"no id\",\"text\":\"gets a line id\"}\n"
      "{not json}\n"
      "{\"id\":\"r5\",\"title\":\"no text\"}\n"
      "[1,2]\n"
      "{\"id\":{\"x\":1},\"text\":\"bad id\"}\n";
  auto r = read_input_bytes("/data/recs.jsonl", jl);
  ASSERT_EQ(r.documents.size(), 3u);
  EXPECT_EQ(r.documents[0].id, "r1");
  EXPECT_EQ(r.documents[0].title, "T1");
  EXPECT_EQ(r.documents[0].text, "alpha text");
  EXPECT_EQ(r.documents[0].source, "/data/recs.jsonl:1");
  EXPECT_EQ(r.documents[0].format, "jsonl");
  EXPECT_TRUE(r.documents[0].url.empty());
  EXPECT_EQ(r.documents[1].id, "7");
  EXPECT_EQ(r.documents[2].id, "/data/recs.jsonl:4");
  ASSERT_EQ(r.skipped.size(), 4u);
  EXPECT_EQ(r.skipped[0].path, "/data/recs.jsonl:5");
  EXPECT_NE(r.skipped[0].reason.find("invalid JSON"), std::string::npos);
  EXPECT_NE(r.skipped[1].reason.find("'text'"), std::string::npos);
  EXPECT_NE(r.skipped[2].reason.find("not a JSON object"), std::string::npos);
  EXPECT_NE(r.skipped[3].reason.find("'id'"), std::string::npos);
}

TEST(Reader, BinaryFileIsSkipped) {
  auto r = read_input_bytes("/x/b.txt", std::string("abc\0def", 7));
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].reason.find("binary"), std::string::npos);
  EXPECT_TRUE(r.documents.empty());
}

TEST(Reader, InvalidUtf8IsSkippedWithOffset) {
  auto r = read_input_bytes("/x/u.md", "good text \xC3\x28 more");
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].reason, "invalid UTF-8 at byte 10");
}

TEST(Reader, OverlongAndSurrogateUtf8AreInvalid) {
  EXPECT_FALSE(read_input_bytes("/x/a.txt", "x\xC0\xAF").skipped.empty());        // overlong '/'
  EXPECT_FALSE(read_input_bytes("/x/a.txt", "x\xED\xA0\x80").skipped.empty());    // surrogate
  EXPECT_TRUE(read_input_bytes("/x/a.txt", "caf\xC3\xA9 \xF0\x9F\x98\x80").skipped.empty());
}

TEST(Reader, EmptyFileIsSkipped) {
  auto r = read_input_bytes("/x/e.txt", "  \n\n ");
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].reason, "empty file");
}

TEST(Reader, HugeLineIsSkipped) {
  ReaderOptions o;
  o.max_line_bytes = 100;
  auto r = read_input_bytes("/x/h.txt", "short\n" + std::string(101, 'x') + "\n", o);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].reason.find("line 2 longer than max_line_bytes"), std::string::npos);
}

TEST(Reader, HugeJsonlRecordSkipsOnlyThatRecord) {
  ReaderOptions o;
  o.max_line_bytes = 100;
  auto r = read_input_bytes("/x/h.jsonl", "{\"id\":\"a\",\"text\":\"" + std::string(200, 'x') + "\"}\n{\"id\":\"b\",\"text\":\"ok\"}\n", o);
  ASSERT_EQ(r.documents.size(), 1u);
  EXPECT_EQ(r.documents[0].id, "b");
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_EQ(r.skipped[0].path, "/x/h.jsonl:1");
}

TEST(Reader, WalksDirectoriesRecursively) {
  TempDir d;
  write_file(d / "top.txt", "top");
  write_file(d / "sub/deeper/x.md", "# x");
  write_file(d / "sub/page.html", "<p>hi</p>");
  write_file(d / "sub/recs.jsonl", "{\"text\":\"t\"}");
  write_file(d / "sub/manual.pdf", "%PDF");  // listed by its name; reading it tells it is no PDF
  write_file(d / "sub/photo.png", "\x89PNG\r\n");
  write_file(d / ".git/config", "ignored");
  write_file(d / ".hidden.txt", "ignored");
  std::vector<SkippedInput> skipped;
  auto files = list_input_files({d.path()}, &skipped);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::vector<std::string> names;
  for (const auto& f : *files) names.push_back(f.path.substr(d.path().size() + 1));
  EXPECT_EQ(names, (std::vector<std::string>{"sub/deeper/x.md", "sub/manual.pdf", "sub/page.html", "sub/recs.jsonl",
                                              "top.txt"}));
  const SkippedInput* png = find_skip(skipped, "photo.png");
  ASSERT_NE(png, nullptr);
  EXPECT_NE(png->reason.find("unsupported file type '.png'"), std::string::npos);
  EXPECT_EQ(png->kind, SkipKind::kUnsupported);
  EXPECT_EQ(find_skip(skipped, ".git"), nullptr);
}

TEST(Reader, MissingPathIsAnError) {
  std::vector<SkippedInput> skipped;
  auto files = list_input_files({"/definitely/not/here"}, &skipped);
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.status().message().find("/definitely/not/here"), std::string::npos);
}

}  // namespace
}  // namespace ragd::retrieval
