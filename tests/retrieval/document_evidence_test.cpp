// Document evidence in lexical and hybrid search (retrieval_mode.h): the re-ranking against a naive
// reference on random hit lists, and end to end in a corpus (hybrid: applied to the fused ranking,
// checked against the naive definition over the fused ranking without evidence).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ragd/retrieval/corpus.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

// The definition, computed the slow way: for the first hit of each (tenant, document), the other
// hits of that document, their scores sorted, the best `chunks` summed; later hits of a document
// keep their scores.
std::vector<std::pair<uint64_t, float>> reference(const DocumentEvidence& o, const std::vector<Hit>& hits) {
  std::vector<std::pair<double, size_t>> boosted;
  for (size_t i = 0; i < hits.size(); ++i) {
    bool first = true;
    for (size_t j = 0; j < i; ++j)
      if (hits[j].tenant == hits[i].tenant && hits[j].chunk.doc_id == hits[i].chunk.doc_id) first = false;
    std::vector<double> others;
    for (size_t j = 0; j < hits.size(); ++j)
      if (first && j != i && hits[j].tenant == hits[i].tenant && hits[j].chunk.doc_id == hits[i].chunk.doc_id)
        others.push_back(hits[j].score);
    std::sort(others.begin(), others.end(), std::greater<>());
    double extra = 0;
    for (size_t r = 0; r < others.size() && r < static_cast<size_t>(o.chunks); ++r) extra += others[r];
    boosted.emplace_back(hits[i].score + o.weight * extra, i);
  }
  std::stable_sort(boosted.begin(), boosted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::pair<uint64_t, float>> out;
  for (const auto& [s, i] : boosted) out.emplace_back(hits[i].chunk.id, static_cast<float>(s));
  return out;
}

TEST(DocumentEvidence, MatchesTheNaiveDefinitionOnRandomHits) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    DocumentEvidence o;
    o.weight = std::uniform_real_distribution<double>(0.0, 0.6)(rng);
    o.chunks = 1 + static_cast<int>(rng() % 9);
    const size_t n = rng() % 37;
    const int docs = 1 + static_cast<int>(rng() % 7);
    std::vector<Hit> hits(n);
    for (size_t i = 0; i < n; ++i) {
      hits[i].score = static_cast<float>(rng() % 40) / 4.0f;  // ties on purpose
      hits[i].tenant = (rng() % 4 == 0) ? "t" : "";
      hits[i].chunk.doc_id = "d" + std::to_string(rng() % static_cast<uint64_t>(docs));
      hits[i].chunk.id = i + 1;
    }
    std::stable_sort(hits.begin(), hits.end(), [](const Hit& a, const Hit& b) { return a.score > b.score; });
    const auto want = reference(o, hits);
    apply_document_evidence(o, &hits);
    ASSERT_EQ(hits.size(), want.size());
    for (size_t i = 0; i < hits.size(); ++i) {
      EXPECT_EQ(hits[i].chunk.id, want[i].first) << "trial " << trial << " rank " << i;
      EXPECT_NEAR(hits[i].score, want[i].second, 1e-4) << "trial " << trial << " rank " << i;
    }
  }
}

TEST(DocumentEvidence, WeightZeroKeepsTheOrder) {
  std::vector<Hit> hits(5);
  for (size_t i = 0; i < hits.size(); ++i) {
    hits[i].score = 5.0f - static_cast<float>(i);
    hits[i].chunk.doc_id = i % 2 ? "a" : "b";
    hits[i].chunk.id = i;
  }
  DocumentEvidence o;
  o.weight = 0;
  apply_document_evidence(o, &hits);
  for (size_t i = 0; i < hits.size(); ++i) EXPECT_EQ(hits[i].chunk.id, i);
}

// In a corpus: a page with several passages on the question's words outranks a page with one
// slightly better passage when evidence is on, and not when it is off.
TEST(DocumentEvidence, PageWithSeveralMatchingPassagesRisesInLexicalSearch) {
  std::vector<std::string> vocab = testing::make_vocabulary(800, 3);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  auto filler = [&](size_t from, int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += vocab[from + static_cast<size_t>(i)] + (i % 9 == 8 ? ". " : " ");
    return s;
  };
  // "one": a single passage with both query words twice. "many": three passages, each with the
  // words once, separated by filler so they are chunks of their own.
  Document one{"one", "", filler(100, 30) + "quartz lantern quartz lantern. " + filler(140, 30)};
  Document many{"many", "",
                filler(200, 40) + "quartz lantern. " + filler(260, 40) + "quartz lantern. " + filler(320, 40) +
                    "quartz lantern. " + filler(380, 40)};
  std::vector<Document> docs{one, many};
  for (int i = 0; i < 30; ++i) docs.push_back({"bg" + std::to_string(i), "", filler(420 + static_cast<size_t>(i) * 10, 60)});
  auto top = [&](double weight) {
    CorpusOptions o;
    o.chunker.chunk_tokens = 24;
    o.evidence.weight = weight;
    o.evidence.chunks = 8;
    const std::string d = dir / ("w" + std::to_string(weight));
    auto c = std::move(Corpus::open(d, o, tok)).value();
    EXPECT_TRUE(c->ingest(docs).ok());
    SearchParams p;
    p.mode = RetrievalMode::kLexical;
    auto hits = c->search("quartz lantern", 3, ReadScope::everything(), p);
    EXPECT_TRUE(hits.ok());
    return hits.ok() && !hits->empty() ? (*hits)[0].chunk.doc_id : std::string();
  };
  EXPECT_EQ(top(0.0), "one");
  EXPECT_EQ(top(0.5), "many");
}

// Hybrid search: evidence applies to the fused ranking's first `candidates` hits — the ranking with
// evidence equals the naive definition applied to the ranking without it (same corpus, same
// lists), cut to k — and the page with several passages rises there too.
TEST(DocumentEvidence, HybridSearchAppliesItToTheFusedRanking) {
  std::vector<std::string> vocab = testing::make_vocabulary(900, 5);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  testing::TempDir dir;
  std::mt19937 rng(23);
  auto filler = [&](int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += vocab[100 + rng() % 700] + (i % 9 == 8 ? ". " : " ");
    return s;
  };
  std::vector<Document> docs;
  docs.push_back({"one", "", filler(30) + "quartz lantern quartz lantern. " + filler(30)});
  docs.push_back({"many", "", filler(40) + "quartz lantern. " + filler(40) + "quartz lantern. " + filler(40) +
                                  "quartz lantern. " + filler(40)});
  // Odd sizes, random words: some background chunks share a query word.
  for (int i = 0; i < 37; ++i) {
    std::string t = filler(20 + static_cast<int>(rng() % 70));
    if (i % 5 == 0) t += " quartz " + filler(9);
    if (i % 7 == 0) t += " lantern " + filler(13);
    docs.push_back({"bg" + std::to_string(i), "", t});
  }
  CorpusOptions off;
  off.chunker.chunk_tokens = 24;
  off.evidence.weight = 0;
  CorpusOptions on = off;
  on.evidence.weight = 0.5;
  on.evidence.chunks = 3;
  // Evidence reads the fused ranking as deep as the dense list goes (both corpora fuse the same
  // two lists: their lengths are HybridOptions').
  on.evidence.candidates = on.hybrid.candidates;
  std::vector<Hit> without, with;
  for (auto* o : {&off, &on}) {
    const std::string d = dir / (o == &off ? "off" : "on");
    auto c = std::move(Corpus::open(d, *o, tok)).value();
    ASSERT_TRUE(c->ingest(docs).ok());
    SearchParams p;
    p.mode = RetrievalMode::kHybrid;
    // Without evidence: the fused ranking as deep as evidence reads; with it: the first 5.
    auto hits = c->search("quartz lantern", o == &off ? on.evidence.candidates : 5, ReadScope::everything(), p);
    ASSERT_TRUE(hits.ok()) << hits.status().to_string();
    (o == &off ? without : with) = std::move(*hits);
  }
  ASSERT_EQ(without.size(), static_cast<size_t>(on.evidence.candidates));
  EXPECT_EQ(without[0].chunk.doc_id, "one");
  const auto want = reference(on.evidence, without);
  ASSERT_EQ(with.size(), 5u);
  for (size_t i = 0; i < with.size(); ++i) {
    EXPECT_EQ(with[i].chunk.id, want[i].first) << "rank " << i;
    EXPECT_NEAR(with[i].score, want[i].second, 1e-5) << "rank " << i;
  }
  EXPECT_EQ(with[0].chunk.doc_id, "many");
}

}  // namespace
}  // namespace ragd::retrieval
