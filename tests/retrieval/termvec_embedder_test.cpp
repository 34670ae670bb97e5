// The term-vector embedder (retrieval/src/termvec_embedder.cpp): vectors against a naive
// reference on random models and texts, the English stemmer's terms, every malformed model
// directory refused with the file named, and a corpus that records it and reopens with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ragd/engine/safetensors.h"
#include "ragd/retrieval/corpus.h"
#include "ragd/retrieval/embedder.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::TempDir;

// A model directory: `terms` (one row each) with random rows, F16 as termvec_train.py writes.
struct TinyModel {
  std::vector<std::string> terms;
  std::vector<float> rows;  // as stored: rounded through f16
  int dim = 0;
};

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}

std::string config_json(int dim, size_t vocab, const std::string& type = "ragd-termvec",
                        const std::string& terms = "xapian-english-stem-all") {
  return "{\"model_type\": \"" + type + "\", \"dim\": " + std::to_string(dim) + ", \"vocab_size\": " +
         std::to_string(vocab) + ", \"terms\": \"" + terms + "\"}\n";
}

void write_rows(const std::string& path, const std::vector<float>& rows, int64_t n, int64_t dim) {
  engine::OwnedTensor t;
  t.dtype = engine::DType::kF16;
  t.shape = {n, dim};
  t.bytes.resize(rows.size() * 2);
  engine::convert_from_f32(rows.data(), rows.size(), engine::DType::kF16, t.bytes.data());
  ASSERT_TRUE(engine::write_safetensors(path, {{"term_vectors", t}}).ok());
}

TinyModel write_model(const std::string& dir, const std::vector<std::string>& terms, int dim, uint64_t seed) {
  TinyModel m;
  m.terms = terms;
  m.dim = dim;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> rows(terms.size() * static_cast<size_t>(dim));
  for (float& x : rows) x = nd(rng);
  std::vector<uint16_t> half(rows.size());
  engine::convert_from_f32(rows.data(), rows.size(), engine::DType::kF16, half.data());
  m.rows.resize(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) m.rows[i] = engine::f16_to_f32(half[i]);
  write_text(dir + "/config.json", config_json(dim, terms.size()));
  std::string vocab;
  for (const auto& t : terms) vocab += t + "\n";
  write_text(dir + "/vocab.txt", vocab);
  write_rows(dir + "/model.safetensors", rows, static_cast<int64_t>(terms.size()), dim);
  return m;
}

// Words the English stemmer leaves as they are (no suffix it knows), so the reference can count
// them without a stemmer: consonant clusters with a digit.
std::vector<std::string> plain_words(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::string cons = "bcdfghjklmnpqrtvwxz";
  std::vector<std::string> out;
  std::map<std::string, bool> seen;
  while (out.size() < n) {
    std::string w;
    const size_t len = 2 + rng() % 4;
    for (size_t i = 0; i < len; ++i) w += cons[rng() % cons.size()];
    w += static_cast<char>('0' + rng() % 10);
    if (!seen[w]) {
      seen[w] = true;
      out.push_back(w);
    }
  }
  return out;
}

TEST(TermVecEmbedder, MatchesNaiveReferenceOnRandomModelsAndTexts) {
  for (int trial = 0; trial < 6; ++trial) {
    TempDir dir;
    const int dim = 3 + trial * 37;  // odd sizes
    const auto words = plain_words(120, 100 + static_cast<uint64_t>(trial));
    // The model knows the first 90 words; the last 30 are out of its vocabulary.
    std::vector<std::string> known(words.begin(), words.begin() + 90);
    TinyModel m = write_model(dir.path(), known, dim, 7 + static_cast<uint64_t>(trial));
    auto e = make_termvec_embedder(dir.path());
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    EXPECT_EQ((*e)->dim(), dim);
    EXPECT_EQ((*e)->name(), "termvec");

    std::mt19937_64 rng(55 + static_cast<uint64_t>(trial));
    std::vector<std::string> texts;
    for (int t = 0; t < 25; ++t) {
      std::string s;
      const size_t n = rng() % 40;
      for (size_t i = 0; i < n; ++i) {
        std::string w = words[rng() % words.size()];
        if (rng() % 5 == 0) w[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(w[0])));  // case folds
        s += w + (rng() % 7 == 0 ? ", " : " ");
      }
      texts.push_back(s);
    }
    std::vector<std::string_view> views(texts.begin(), texts.end());
    std::vector<float> got;
    ASSERT_TRUE((*e)->embed(views, &got).ok());
    ASSERT_EQ(got.size(), texts.size() * static_cast<size_t>(dim));
    for (size_t t = 0; t < texts.size(); ++t) {
      // Reference: count each known word (lower-cased), sum (1 + ln tf) x row, normalise.
      std::map<std::string, int> tf;
      std::string w;
      for (char c : texts[t] + " ") {
        if (std::isalnum(static_cast<unsigned char>(c))) {
          w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        } else if (!w.empty()) {
          ++tf[w];
          w.clear();
        }
      }
      std::vector<double> ref(static_cast<size_t>(dim), 0.0);
      for (const auto& [word, n] : tf) {
        auto it = std::find(known.begin(), known.end(), word);
        if (it == known.end()) continue;
        const size_t row = static_cast<size_t>(it - known.begin());
        for (int j = 0; j < dim; ++j)
          ref[static_cast<size_t>(j)] += (1.0 + std::log(static_cast<double>(n))) * m.rows[row * static_cast<size_t>(dim) + static_cast<size_t>(j)];
      }
      double norm = 0;
      for (double x : ref) norm += x * x;
      for (int j = 0; j < dim; ++j) {
        const double want = norm > 0 ? ref[static_cast<size_t>(j)] / std::sqrt(norm) : 0.0;
        EXPECT_NEAR(got[t * static_cast<size_t>(dim) + static_cast<size_t>(j)], want, 1e-5)
            << "trial " << trial << " text " << t << " dim " << j;
      }
    }
  }
}

TEST(TermVecEmbedder, TermsAreStemmedAsTheLexicalIndexStemsThem) {
  TempDir dir;
  write_model(dir.path(), {"run", "quick", "librari"}, 16, 3);
  auto e = make_termvec_embedder(dir.path());
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  std::vector<std::string_view> a = {"Running runs quickly; libraries", "run run quick librari"};
  std::vector<float> v;
  ASSERT_TRUE((*e)->embed(a, &v).ok());
  for (int j = 0; j < 16; ++j) EXPECT_NEAR(v[static_cast<size_t>(j)], v[16 + static_cast<size_t>(j)], 1e-6) << j;
  // No known term: the zero vector.
  std::vector<std::string_view> none = {"zzz0 qq9", ""};
  ASSERT_TRUE((*e)->embed(none, &v).ok());
  for (float x : v) EXPECT_EQ(x, 0.0f);
}

TEST(TermVecEmbedder, MalformedDirectoriesAreRefusedNamingTheFile) {
  const std::vector<std::string> terms = {"alpha", "beta", "gamma"};
  struct Case {
    std::string what;
    std::function<void(const std::string&)> damage;
    std::string expect;  // part of the message
  };
  const std::vector<Case> cases = {
      {"no config", [](const std::string& d) { std::filesystem::remove(d + "/config.json"); }, "config.json"},
      {"not JSON", [](const std::string& d) { write_text(d + "/config.json", "{dim: 3"); }, "config.json: not a JSON object"},
      {"other model type", [](const std::string& d) { write_text(d + "/config.json", config_json(8, 3, "bert")); }, "model_type"},
      {"other term scheme",
       [](const std::string& d) { write_text(d + "/config.json", config_json(8, 3, "ragd-termvec", "whitespace")); }, "terms"},
      {"dim 0", [](const std::string& d) { write_text(d + "/config.json", config_json(0, 3)); }, "dim"},
      {"vocab size differs", [](const std::string& d) { write_text(d + "/config.json", config_json(8, 4)); }, "vocab.txt: 3 terms"},
      {"repeated term", [](const std::string& d) { write_text(d + "/vocab.txt", "alpha\nbeta\nalpha\n"); }, "vocab.txt:3: term repeated"},
      {"empty term", [](const std::string& d) { write_text(d + "/vocab.txt", "alpha\n\nbeta\n"); }, "vocab.txt:2: empty term"},
      {"no vocab", [](const std::string& d) { std::filesystem::remove(d + "/vocab.txt"); }, "vocab.txt"},
      {"no weights", [](const std::string& d) { std::filesystem::remove(d + "/model.safetensors"); }, "model.safetensors"},
      {"wrong shape",
       [](const std::string& d) { write_rows(d + "/model.safetensors", std::vector<float>(3 * 9, 0.5f), 3, 9); },
       "term_vectors must be [3, 8]"},
      {"non-finite",
       [](const std::string& d) {
         std::vector<float> r(3 * 8, 0.5f);
         r[5] = std::nanf("");
         write_rows(d + "/model.safetensors", r, 3, 8);
       },
       "non-finite"},
      {"truncated weights",
       [](const std::string& d) { std::filesystem::resize_file(d + "/model.safetensors", 20); }, "model.safetensors"},
  };
  for (const Case& c : cases) {
    TempDir dir;
    write_model(dir.path(), terms, 8, 1);
    ASSERT_TRUE(make_termvec_embedder(dir.path()).ok()) << c.what;
    c.damage(dir.path());
    auto e = make_termvec_embedder(dir.path());
    ASSERT_FALSE(e.ok()) << c.what;
    EXPECT_NE(e.status().message().find(c.expect), std::string::npos) << c.what << ": " << e.status().to_string();
  }
  auto e = make_termvec_embedder("");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no model directory"), std::string::npos);
}

TEST(TermVecEmbedder, CorpusRecordsItReopensWithItAndRefusesAnotherModel) {
  TempDir model, other, data;
  const auto words = plain_words(400, 9);
  write_model(model.path(), words, 32, 1);
  write_model(other.path(), words, 32, 2);  // same shape, other rows
  auto vocab = words;
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  std::vector<Document> docs;
  std::mt19937_64 rng(4);
  for (int i = 0; i < 40; ++i) {
    Document d;
    d.id = "d" + std::to_string(i);
    for (int j = 0; j < 30; ++j) d.text += words[static_cast<size_t>(i * 10) + rng() % 10] + " ";
    docs.push_back(std::move(d));
  }
  std::string identity;
  {
    CorpusOptions o;
    o.embedder.name = "model";  // a termvec directory given as "model" is the termvec embedder
    o.embedder.model_dir = model.path();
    auto c = Corpus::open(data.path(), o, tok);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    ASSERT_TRUE((*c)->ingest(docs).ok());
    identity = (*c)->stats().embedder;
    EXPECT_EQ(identity.rfind("termvec/", 0), 0u) << identity;
    EXPECT_EQ((*c)->default_mode(), RetrievalMode::kHybrid);
    EXPECT_TRUE((*c)->ranks_by_ratio_score(RetrievalMode::kAuto));  // weighted fusion
    EXPECT_TRUE((*c)->ranks_by_ratio_score(RetrievalMode::kLexical));
    EXPECT_FALSE((*c)->ranks_by_ratio_score(RetrievalMode::kDense));
  }
  {
    CorpusOptions rrf;
    rrf.read_only = true;
    rrf.hybrid.fusion = HybridFusion::kReciprocalRank;
    auto c = Corpus::open(data.path(), rrf, nullptr);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_FALSE((*c)->ranks_by_ratio_score(RetrievalMode::kHybrid));  // fused ranks: no ratio scale
  }
  CorpusOptions ro;
  ro.read_only = true;
  auto c = Corpus::open(data.path(), ro, nullptr);  // the embedder and its directory come from the corpus
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ((*c)->stats().embedder, identity);
  SearchParams dense;
  dense.mode = RetrievalMode::kDense;
  for (int i : {0, 17, 39}) {
    auto hits = (*c)->search(docs[static_cast<size_t>(i)].text, 1, ReadScope::everything(), dense);
    ASSERT_TRUE(hits.ok()) << hits.status().to_string();
    ASSERT_FALSE(hits->empty());
    EXPECT_EQ((*hits)[0].chunk.doc_id, docs[static_cast<size_t>(i)].id);
  }
  CorpusOptions o2 = ro;
  o2.embedder.name = "termvec";
  o2.embedder.model_dir = other.path();
  auto refused = Corpus::open(data.path(), o2, nullptr);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("corpus was built with embedder"), std::string::npos)
      << refused.status().to_string();
}

// Embedder name "auto": a corpus with no embedder recorded gets term vectors ($RAGD_TERMVEC_DIR
// here), one built with another embedder keeps it; "" keeps hashing for a new corpus.
TEST(TermVecEmbedder, AutoGivesANewCorpusTermVectorsAndKeepsAnExistingOnesEmbedder) {
  TempDir model, fresh, hashed, plain;
  write_model(model.path(), plain_words(50, 3), 16, 1);
  auto tok = std::make_shared<testing::WordTokenizer>(plain_words(50, 3));
  const char* old = std::getenv("RAGD_TERMVEC_DIR");
  const std::string saved = old ? old : "";
  ::setenv("RAGD_TERMVEC_DIR", model.path().c_str(), 1);
  CorpusOptions as_auto;
  as_auto.embedder.name = "auto";
  auto a = Corpus::open(fresh.path(), as_auto, tok);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ((*a)->stats().embedder.rfind("termvec/", 0), 0u) << (*a)->stats().embedder;
  {
    auto h = Corpus::open(hashed.path(), CorpusOptions{}, tok);  // "" : hashing for a new corpus
    ASSERT_TRUE(h.ok());
    EXPECT_EQ((*h)->stats().embedder.rfind("hashing", 0), 0u);
  }
  auto again = Corpus::open(hashed.path(), as_auto, tok);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ((*again)->stats().embedder.rfind("hashing", 0), 0u) << (*again)->stats().embedder;
  ::unsetenv("RAGD_TERMVEC_DIR");
  if (!saved.empty()) ::setenv("RAGD_TERMVEC_DIR", saved.c_str(), 1);
}

}  // namespace
}  // namespace ragd::retrieval
