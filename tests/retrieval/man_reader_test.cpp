// Manual pages (roff source, man(7) and mdoc(7)), gzip-compressed documents and text files without
// an extension: man_text.cpp and the reader's content checks.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "man_text.h"
#include "ragd/common/utf8.h"
#include "ragd/retrieval/reader.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::TempDir;
using testing::write_file;

std::string gzip(const std::string& raw) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&zs, raw.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  zs.avail_in = static_cast<uInt>(raw.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

// The text of section i (by its byte range).
std::string section_text(const ManText& m, size_t i) {
  const Section& s = m.sections.at(i);
  return m.text.substr(s.byte_begin, s.byte_end - s.byte_begin);
}

constexpr const char* kManPage = R"(.\" Copyright notice, a comment
.de XX
This macro body is not text.
..
.TH FROB 1 "2024-01-01" "frob 2.0" "User Commands"
.SH NAME
frob, frobnicate \- turn widgets into \fBgadgets\fR
.SH SYNOPSIS
.B frob
[\fIOPTION\fR]... \fIFILE\fR
.SH DESCRIPTION
.B frob
reads each
.I FILE
and writes it back \(em changed.
It doesn\(aqt touch the original.
.SS Options
.TP
.BR \-v ", " \-\-verbose
Say what is done.
.TP
\fB\-n\fR \fINUM\fR
Stop after
.IR NUM " widgets."
.SH EXAMPLES
.nf
frob a.txt
    frob \-v b.txt
.fi
.PP
See
.UR https://example.org/frob
the home page
.UE .
.TS
tab(;);
l l.
Exit;Meaning
0;success
.TE
)";

TEST(ManText, RendersMacrosEscapesAndSections) {
  ManText m = man_to_text(kManPage);
  EXPECT_EQ(m.name, "FROB");
  EXPECT_EQ(m.section, "1");
  EXPECT_EQ(m.description, "turn widgets into gadgets");
  EXPECT_EQ(m.title(), "frob(1) \u2014 turn widgets into gadgets");
  EXPECT_TRUE(m.link.empty());
  EXPECT_EQ(m.text,
            "NAME\n\nfrob, frobnicate - turn widgets into gadgets\n\n"
            "SYNOPSIS\n\nfrob [OPTION]... FILE\n\n"
            "DESCRIPTION\n\nfrob reads each FILE and writes it back - changed. It doesn't touch the original.\n\n"
            "Options\n\n-v, --verbose\nSay what is done.\n\n-n NUM\nStop after NUM widgets.\n\n"
            "EXAMPLES\n\nfrob a.txt\n    frob -v b.txt\n\n"
            "See the home page <https://example.org/frob>.\n\n"
            "Exit Meaning\n0 success");
  ASSERT_EQ(m.sections.size(), 5u);
  EXPECT_EQ(m.sections[0].path, std::vector<std::string>{"NAME"});
  EXPECT_EQ(m.sections[3].path, (std::vector<std::string>{"DESCRIPTION", "Options"}));
  EXPECT_EQ(m.sections[4].path, std::vector<std::string>{"EXAMPLES"});
  EXPECT_EQ(section_text(m, 1), "SYNOPSIS\n\nfrob [OPTION]... FILE\n\n");
  EXPECT_EQ(section_text(m, 3).rfind("Options\n\n-v, --verbose", 0), 0u);
  EXPECT_TRUE(sections_fit(m.sections, m.text.size()));
  EXPECT_EQ(m.sections.back().byte_end, m.text.size());
}

TEST(ManText, ReadsMdocPages) {
  ManText m = man_to_text(R"(.Dd January 1, 2024
.Dt WIDGET 5
.Os
.Sh NAME
.Nm widget.conf
.Nd configuration of the widget daemon
.Sh SYNOPSIS
.Nm
.Op Fl a
.Ar file
.Sh DESCRIPTION
The
.Nm
file is read at start, see
.Xr widgetd 8 .
.Bl -tag -width Ds
.It Fl v
Print more.
.El
.Ss Limits
At most
.Dq 64
widgets.
)");
  EXPECT_EQ(m.name, "WIDGET");
  EXPECT_EQ(m.section, "5");
  EXPECT_EQ(m.description, "configuration of the widget daemon");
  EXPECT_EQ(m.title(), "widget(5) \u2014 configuration of the widget daemon");
  EXPECT_NE(m.text.find("widget.conf - configuration of the widget daemon"), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("widget.conf [-a] file"), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("see widgetd(8)."), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("-v\nPrint more."), std::string::npos) << m.text;
  EXPECT_NE(m.text.find("At most \"64\" widgets."), std::string::npos) << m.text;
  ASSERT_EQ(m.sections.size(), 4u);
  EXPECT_EQ(m.sections[3].path, (std::vector<std::string>{"DESCRIPTION", "Limits"}));
  EXPECT_TRUE(sections_fit(m.sections, m.text.size()));
}

TEST(ManText, RecognisesPagesByContentAndName) {
  EXPECT_TRUE(looks_like_man(".\\\" comment\n'\\\" t\n.TH LS 1\n", false));
  EXPECT_TRUE(looks_like_man("\n.Dd $Mdocdate$\n.Dt LS 1\n", false));
  EXPECT_TRUE(looks_like_man(".so man1/other.1\n", false));
  // pod2man's preamble: definitions first, the .TH beyond the first bytes.
  EXPECT_TRUE(looks_like_man(".de Sp\n.if t .sp .5v\n..\n", true));
  EXPECT_FALSE(looks_like_man(".de Sp\n.if t .sp .5v\n..\n", false));
  EXPECT_FALSE(looks_like_man("# A heading\n\n.TH is mentioned here\n", true));
  EXPECT_FALSE(looks_like_man(".so notes\n", false));
  EXPECT_FALSE(looks_like_man("", true));
}

// Random roff-like lines (macros, escapes cut anywhere, multi-byte characters after escapes that
// take a fixed number of bytes): the text is valid UTF-8 and the sections tile it in order.
TEST(ManText, RandomInputGivesValidTextAndSections) {
  const char* pieces[] = {".SH ", ".SS ", ".TP\n", ".B ", ".BR a b", "\\f", "\\fB", "\\(", "\\(em", "\\[", "\\[u00E9]",
                          "\\*", "\\*(lq", "\\\"", "\\", "\\c", "\\h'", "\\s-", ".de X\n", "..\n", ".TS\n", ".TE\n",
                          ".nf\n", ".fi\n", "word ", "\xC3\xA9", "\xE2\x82\xAC", "\"q\" ", "\n", "\n", ".Nm x", ".Op Fl",
                          ".It ", ".IP tag", ".UR u", ".UE", ".so f", " \t", ".Ns", "\\-"};
  std::mt19937 rng(7);
  for (int round = 0; round < 300; ++round) {
    std::string roff;
    const int n = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) roff += pieces[rng() % std::size(pieces)];
    ManText m = man_to_text(roff);
    ASSERT_EQ(find_invalid_utf8(m.text), std::string_view::npos) << roff;
    ASSERT_TRUE(sections_fit(m.sections, m.text.size())) << roff;
    for (size_t i = 1; i < m.sections.size(); ++i) ASSERT_EQ(m.sections[i - 1].byte_end, m.sections[i].byte_begin) << roff;
  }
}

TEST(Reader, ManualPagesAndTheirCompressedFormAreReadAsManPages) {
  TempDir d;
  write_file(d / "frob.1", kManPage);
  write_file(d / "frob.1.gz", gzip(kManPage));
  write_file(d / "link.1", ".so man1/frob.1\n");
  for (const char* name : {"frob.1", "frob.1.gz"}) {
    ReadResult r = read_input_file(d / name);
    ASSERT_EQ(r.documents.size(), 1u) << name;
    const Document& doc = r.documents[0];
    EXPECT_EQ(doc.format, "man");
    EXPECT_EQ(doc.title, "frob(1) \u2014 turn widgets into gadgets");
    EXPECT_EQ(doc.id, d / name);
    EXPECT_EQ(doc.text, man_to_text(kManPage).text);
    EXPECT_EQ(doc.sections.size(), 5u);
  }
  ReadResult link = read_input_file(d / "link.1");
  EXPECT_TRUE(link.documents.empty());
  EXPECT_TRUE(link.skipped.empty());
  ASSERT_EQ(link.notes.size(), 1u);
  EXPECT_NE(link.notes[0].note.find("a link to another manual page (.so man1/frob.1)"), std::string::npos);
}

TEST(Reader, GzipDocumentsAreReadByWhatTheyHold) {
  TempDir d;
  const std::string md = "# Install\n\nRun the installer.\n\n## Upgrade\n\nRun it again.\n";
  write_file(d / "README.md.gz", gzip(md));
  // Two gzip members, as `cat a.gz b.gz` makes: both are read.
  write_file(d / "NEWS.gz", gzip("Version 2: faster.\n") + gzip("Version 1: first release.\n"));
  ReadResult r = read_input_file(d / "README.md.gz");
  ASSERT_EQ(r.documents.size(), 1u);
  EXPECT_EQ(r.documents[0].format, "markdown");
  EXPECT_EQ(r.documents[0].text, md);
  EXPECT_EQ(r.documents[0].title, "Install");
  ASSERT_EQ(r.documents[0].sections.size(), 2u);
  EXPECT_EQ(r.documents[0].sections[1].path, (std::vector<std::string>{"Install", "Upgrade"}));
  ReadResult news = read_input_file(d / "NEWS.gz");
  ASSERT_EQ(news.documents.size(), 1u);
  EXPECT_EQ(news.documents[0].text, "Version 2: faster.\nVersion 1: first release.\n");

  // Damaged, cut off, too large once decompressed, or an image inside: each says so.
  std::string damaged = gzip(md);
  for (size_t i = 12; i < damaged.size() - 8; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5A);
  write_file(d / "damaged.txt.gz", damaged);
  std::string whole = gzip(std::string(5000, 'a') + "\n");
  write_file(d / "cut.txt.gz", whole.substr(0, whole.size() / 2));
  write_file(d / "big.txt.gz", whole);
  write_file(d / "image.gz", gzip(std::string("\x89PNG\r\n\x1a\n", 8) + std::string(64, 'x')));
  auto reason = [&](const std::string& name, const ReaderOptions& o = {}) {
    ReadResult x = read_input_file(d / name, o);
    EXPECT_TRUE(x.documents.empty()) << name;
    return x.skipped.empty() ? std::string("(not skipped)") : x.skipped[0].reason;
  };
  EXPECT_NE(reason("damaged.txt.gz").find("damaged gzip data"), std::string::npos) << reason("damaged.txt.gz");
  EXPECT_EQ(reason("cut.txt.gz"), "damaged gzip data: the stream ends early");
  ReaderOptions small;
  small.max_file_bytes = 4096;
  EXPECT_NE(reason("big.txt.gz", small).find("larger than max_file_bytes once decompressed"), std::string::npos);
  EXPECT_EQ(reason("image.gz"), "unsupported format: PNG image");
}

// A directory ingest picks files by content where the extension says nothing: text without an
// extension, manual pages, compressed text; binary data, stylesheets and compressed images are
// left out as unsupported, with what they are.
TEST(Reader, DirectoryListingDecidesUnknownNamesByContent) {
  TempDir d;
  write_file(d / "README", "Read me first.\n");
  write_file(d / "copyright", "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n");
  write_file(d / "blob", std::string("\x01\x02\x00\x03", 4));
  write_file(d / "style.css", "body { color: red; }\n");
  write_file(d / "man/frob.1", kManPage);
  write_file(d / "man/Frob::Util.3pm", ".de Sp\n..\n.TH Frob::Util 3pm\n.SH NAME\nFrob::Util \\- helpers\n");
  write_file(d / "changelog.Debian.gz", gzip("frob (2.0-1) unstable; urgency=low\n"));
  write_file(d / "shot.png.gz", gzip(std::string("\x89PNG\r\n\x1a\n", 8)));
  std::vector<SkippedInput> skipped;
  auto files = list_input_files({d.path()}, &skipped);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  std::vector<std::string> names;
  for (const auto& f : *files) names.push_back(f.id);
  EXPECT_EQ(names, (std::vector<std::string>{"README", "changelog.Debian.gz", "copyright", "man/Frob::Util.3pm",
                                             "man/frob.1"}));
  std::vector<std::string> left;
  for (const auto& s : skipped) {
    EXPECT_EQ(s.kind, SkipKind::kUnsupported) << s.path;
    left.push_back(std::filesystem::path(s.path).filename().string() + ": " + s.reason);
  }
  EXPECT_EQ(left, (std::vector<std::string>{"blob: unsupported file type (no extension, not text)",
                                            "shot.png.gz: unsupported file type '.gz' (PNG image)",
                                            "style.css: unsupported file type '.css'"}));
  for (const auto& f : *files) {
    ReadResult r = read_input_file(f.path);
    ASSERT_EQ(r.documents.size(), 1u) << f.path;
    if (f.id.rfind("man/", 0) == 0) {
      EXPECT_EQ(r.documents[0].format, "man") << f.path;
    }
  }
}

// A page as Debian installs it, when this machine has it (coreutils' ls(1); images built without
// manual pages have none).
TEST(Reader, RealManualPageFromDebian) {
  const std::string path = "/usr/share/man/man1/ls.1.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed here";
  ReadResult r = read_input_file(path);
  ASSERT_EQ(r.documents.size(), 1u);
  const Document& doc = r.documents[0];
  EXPECT_EQ(doc.format, "man");
  EXPECT_EQ(doc.title, "ls(1) \u2014 list directory contents");
  bool description = false;
  for (const Section& s : doc.sections) description |= s.path == std::vector<std::string>{"DESCRIPTION"};
  EXPECT_TRUE(description);
  EXPECT_NE(doc.text.find("-a, --all\ndo not ignore entries starting with ."), std::string::npos) << doc.text.substr(0, 2000);
  EXPECT_EQ(doc.text.find("\\f"), std::string::npos);
  EXPECT_EQ(doc.text.find(".TP"), std::string::npos);
}

}  // namespace
}  // namespace ragd::retrieval
