// TermCounter against its reference, Xapian's own TermGenerator configured as the lexical index
// configured it before (English stemmer, STEM_ALL, STOP_ALL with a stopword list, no positions):
// the same terms with the same within-document frequencies, on random text built from the
// characters TermGenerator treats specially (initials, ' and & between words, , . ; between
// digits, + and # after words, words over 64 bytes, non-ASCII letters, apostrophes and spaces),
// and on real English prose (the licence texts every Debian system ships).
#include "term_counter.h"

#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <xapian.h>

namespace ragd::retrieval {
namespace {

constexpr const char* kStop[] = {"the", "a", "of", "to", "and", "is", "how", "do", "i", "can't", "it's", "what"};

using Terms = std::vector<std::pair<std::string, uint32_t>>;

// The reference: TermGenerator into a document, its terms and wdf.
Terms reference(const std::vector<std::pair<std::string, unsigned>>& texts, bool with_stopper) {
  Xapian::Stem stem("english");
  Xapian::SimpleStopper stopper(std::begin(kStop), std::end(kStop));
  Xapian::TermGenerator tg;
  tg.set_stemmer(stem);
  if (with_stopper) tg.set_stopper(&stopper);
  tg.set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
  tg.set_stopper_strategy(Xapian::TermGenerator::STOP_ALL);
  Xapian::Document doc;
  tg.set_document(doc);
  for (const auto& [text, wdf] : texts) tg.index_text_without_positions(text, wdf);
  Terms out;
  for (auto t = doc.termlist_begin(); t != doc.termlist_end(); ++t) out.emplace_back(*t, t.get_wdf());
  return out;
}

Terms counted(TermCounter& tc, const std::vector<std::pair<std::string, unsigned>>& texts) {
  tc.clear();
  for (const auto& [text, wdf] : texts) tc.add_text(text, wdf);
  return tc.terms();
}

std::string describe(const Terms& t) {
  std::string s;
  for (const auto& [term, wdf] : t) s += "[" + term + "]x" + std::to_string(wdf) + " ";
  return s;
}

// Pieces of text TermGenerator treats specially, and plain ones.
const std::vector<std::string> kPieces = {
    "a", "B", "Z", "x", "9", "0", "42", "_", "Cat", "running", "U", "S", "A", ".", ",", ";", ":", "'", "&", "+",
    "#", "-", "/", "(", ")", "\"", "$", "@", "!", "?", " ", " ", " ", "\n", "\t", "C++", "C#", "AT&T", "don't",
    "it's", "can't", "U.S.A.", "e.g.", "3.14", "1,000", "v2;3", "os.path", "get_terminal_size", "Node.js",
    "caf\xc3\xa9", "na\xc3\xafve", "\xe2\x80\x99", "\xe2\x80\x94", "stra\xc3\x9f" "e", "\xc2\xb7", "\xc2\xa0",
    "\xe2\x80\x8b", "\xd0\x9c\xd0\xbe\xd1\x81\xd0\xba\xd0\xb2\xd0\xb0", "generalizations", "THE", "How", "What",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"};

TEST(TermCounter, EqualsTermGeneratorOnRandomText) {
  std::mt19937 rng(20261207);
  std::uniform_int_distribution<size_t> piece(0, kPieces.size() - 1);
  std::uniform_int_distribution<int> len(0, 40), nfields(1, 3), wdf(1, 3);
  TermCounter with_stop{std::span<const char* const>(kStop)};
  TermCounter without_stop{std::span<const char* const>()};
  int nonempty = 0;
  for (int it = 0; it < 4000; ++it) {
    std::vector<std::pair<std::string, unsigned>> texts;
    const int f = nfields(rng);
    for (int k = 0; k < f; ++k) {
      std::string s;
      const int n = len(rng);
      for (int j = 0; j < n; ++j) s += kPieces[piece(rng)];
      texts.emplace_back(std::move(s), static_cast<unsigned>(wdf(rng)));
    }
    const bool stop = it % 2 == 0;
    const Terms want = reference(texts, stop);
    const Terms got = counted(stop ? with_stop : without_stop, texts);
    std::string all;
    for (const auto& [t, w] : texts) all += "<" + t + ">x" + std::to_string(w) + " ";
    ASSERT_EQ(describe(got), describe(want)) << "texts: " << all;
    nonempty += !want.empty();
  }
  EXPECT_GT(nonempty, 3000);  // the random texts do make terms
}

TEST(TermCounter, EqualsTermGeneratorOnRealProse) {
  TermCounter tc{std::span<const char* const>(kStop)};
  int files = 0;
  for (const char* path : {"/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0",
                           "/usr/share/common-licenses/Artistic"}) {
    std::ifstream f(path);
    if (!f) continue;
    ++files;
    std::stringstream ss;
    ss << f.rdbuf();
    const std::string text = ss.str();
    // Paragraph by paragraph (chunk-sized texts), and the whole file as one text.
    size_t b = 0;
    while (b < text.size()) {
      size_t e = text.find("\n\n", b);
      if (e == std::string::npos) e = text.size();
      const std::vector<std::pair<std::string, unsigned>> one = {{text.substr(b, e - b), 1}};
      ASSERT_EQ(describe(counted(tc, one)), describe(reference(one, true))) << path << " at byte " << b;
      b = e + 2;
    }
    const std::vector<std::pair<std::string, unsigned>> whole = {{text, 1}, {"Title of " + std::string(path), 2}};
    const Terms want = reference(whole, true);
    EXPECT_GT(want.size(), 200u) << path;
    EXPECT_EQ(describe(counted(tc, whole)), describe(want)) << path;
  }
  if (files == 0) GTEST_SKIP() << "no /usr/share/common-licenses texts on this system";
}

TEST(TermCounter, ClearForgetsTheCountsAndStemsStayRight) {
  TermCounter tc{std::span<const char* const>(kStop)};
  tc.add_text("running runs ran", 1);
  tc.clear();
  tc.add_text("The runner is running", 2);
  const Terms got = tc.terms();
  EXPECT_EQ(describe(got), describe(reference({{"The runner is running", 2}}, true)));
  EXPECT_EQ(describe(got), "[run]x2 [runner]x2 ");
}

}  // namespace
}  // namespace ragd::retrieval
