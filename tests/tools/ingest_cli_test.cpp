// `ragctl ingest` through the real command line: what is left out is listed with its reason, and the
// exit status says whether everything was ingested (issue 49: a directory whose every file was
// skipped exited 0). 3 = finished, but input was rejected or of an unsupported format;
// --skip-unsupported accepts the unsupported ones only.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../run_capture.h"
#include "pdf_fixture.h"

namespace ragd::testing {
namespace {

namespace fs = std::filesystem;
using retrieval::testing::make_pdf;
using retrieval::testing::pdf_text_page;
using retrieval::testing::PdfSpec;

class IngestCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(RAGD_BIN_DIR "/ragctl")) GTEST_SKIP() << "bin/ragctl not built";
    dir_ = fs::temp_directory_path() / ("ragd_ingest_cli_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "in");
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  void write(const std::string& rel, const std::string& bytes) {
    fs::create_directories((dir_ / "in" / rel).parent_path());
    std::ofstream(dir_ / "in" / rel, std::ios::binary) << bytes;
  }

  // ragctl ingest <dir>/in into a fresh data directory, plus `extra` arguments.
  Ran ingest(const std::vector<std::string>& extra) {
    fs::remove_all(dir_ / "data");
    std::vector<std::string> argv_s = {RAGD_BIN_DIR "/ragctl", "ingest", (dir_ / "in").string(), "--data",
                                       (dir_ / "data").string(), "--model", RAGD_SOURCE_DIR "/models/ragd-qa",
                                       "--quiet"};
    argv_s.insert(argv_s.end(), extra.begin(), extra.end());
    return run_capture(argv_s);
  }

  fs::path dir_;
};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string tiny_pdf() {
  PdfSpec spec;
  spec.pages = {pdf_text_page({"Zebras graze on the first page."}), pdf_text_page({"Giraffes browse on the second page."})};
  return make_pdf(spec);
}

TEST_F(IngestCliTest, EverythingReadExitsZero) {
  write("notes.txt", "Plain notes about herons.\n");
  write("manual.pdf", tiny_pdf());
  Ran r = ingest({});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "ingested 3,")) << r.out;  // the text file and two pages
  EXPECT_TRUE(has(r.out, "skipped 0 ")) << r.out;
}

TEST_F(IngestCliTest, RejectedFileMakesTheExitNonZeroWithTheReason) {
  write("notes.txt", "Plain notes about herons.\n");
  write("fake.pdf", "Text saved under a PDF name.\n");
  PdfSpec locked;
  locked.pages = {pdf_text_page({"Secret."})};
  locked.encrypted = true;
  write("locked.pdf", make_pdf(locked));
  for (const auto& extra : {std::vector<std::string>{}, std::vector<std::string>{"--skip-unsupported"}}) {
    Ran r = ingest(extra);
    EXPECT_EQ(r.status, 3) << r.out << r.err;
    EXPECT_TRUE(has(r.out, "ingested 1,")) << r.out;  // the rest is ingested
    EXPECT_TRUE(has(r.out, "fake.pdf: not a PDF (no %PDF- header)")) << r.out;
    EXPECT_TRUE(has(r.out, "locked.pdf: encrypted PDF")) << r.out;
    EXPECT_TRUE(has(r.err, "2 inputs rejected")) << r.err;
  }
}

TEST_F(IngestCliTest, UnsupportedFilesNeedSkipUnsupported) {
  write("notes.txt", "Plain notes about herons.\n");
  write("photo.png", std::string("\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16));
  Ran r = ingest({});
  EXPECT_EQ(r.status, 3) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "photo.png: unsupported file type '.png' (PNG image)")) << r.out;
  EXPECT_TRUE(has(r.err, "--skip-unsupported")) << r.err;
  r = ingest({"--skip-unsupported"});
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "ingested 1,")) << r.out;
  EXPECT_TRUE(has(r.out, "(0 rejected, 1 unsupported)")) << r.out;  // still counted and listed
  EXPECT_TRUE(has(r.out, "photo.png")) << r.out;
}

// A new corpus gets the shipped term vectors (hybrid search by default); --embedder hashing keeps
// hashed words (lexical by default); a second ingest into the corpus keeps its embedder.
TEST_F(IngestCliTest, NewCorpusGetsTheShippedTermVectorsAndKeepsThem) {
  if (!fs::exists(RAGD_SOURCE_DIR "/models/ragd-termvec/config.json")) GTEST_SKIP() << "models/ragd-termvec absent";
  write("herons.txt", "Plain notes about herons.\n");
  Ran r = ingest({});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_TRUE(has(r.out, "embedder termvec/")) << r.out;
  write("egrets.txt", "Egrets wade in shallow water.\n");
  std::vector<std::string> again = {RAGD_BIN_DIR "/ragctl", "ingest", (dir_ / "in").string(), "--data",
                                    (dir_ / "data").string(), "--model", RAGD_SOURCE_DIR "/models/ragd-qa", "--quiet"};
  Ran r2 = run_capture(again);
  ASSERT_EQ(r2.status, 0) << r2.out << r2.err;
  EXPECT_TRUE(has(r2.out, "embedder termvec/")) << r2.out;
  Ran s = run_capture({RAGD_BIN_DIR "/ragctl", "search", "egrets", "--data", (dir_ / "data").string(), "-k", "1"});
  ASSERT_EQ(s.status, 0) << s.out << s.err;
  EXPECT_TRUE(has(s.out, "egrets.txt")) << s.out;
  Ran h = ingest({"--embedder", "hashing"});
  ASSERT_EQ(h.status, 0) << h.out << h.err;
  EXPECT_TRUE(has(h.out, "embedder hashing-v2/")) << h.out;
}

}  // namespace
}  // namespace ragd::testing
