// Rebuilding a corpus's indexes from its store: Corpus::reindex, the lexical index of an older term
// scheme rebuilt at open, and a corpus that keeps no lexical index (CorpusOptions::lexical_index).
#include "ragd/retrieval/corpus.h"

#include <gtest/gtest.h>

#include <random>
#include <span>
#include <string>
#include <vector>

#include <xapian.h>

#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::TempDir;

struct Words {
  std::vector<std::string> vocab = testing::make_vocabulary(3000, 17);
  std::shared_ptr<testing::WordTokenizer> tok = std::make_shared<testing::WordTokenizer>(vocab);
  std::vector<std::string> common{vocab.begin(), vocab.begin() + 200};

  std::vector<Document> docs(size_t n, uint64_t seed) const {
    std::mt19937_64 rng(seed);
    std::vector<Document> out;
    for (size_t i = 0; i < n; ++i) {
      const size_t base = 200 + (i * 37) % (vocab.size() - 240);
      std::vector<std::string> topic(vocab.begin() + static_cast<long>(base), vocab.begin() + static_cast<long>(base + 37));
      Document d;
      d.id = "d" + std::to_string(seed) + "-" + std::to_string(i);
      d.title = topic[0] + " " + topic[1];
      d.text = testing::make_text(rng, topic, common, 2 + static_cast<int>(rng() % 3));
      d.metadata = {{"n", std::to_string(i % 5)}};
      out.push_back(std::move(d));
    }
    return out;
  }
};

CorpusOptions opts() {
  CorpusOptions o;
  o.chunker.chunk_tokens = 48;
  return o;
}

// Chunk ids of every search (lexical and dense, one per document title), in order.
std::vector<std::vector<uint64_t>> rankings(const Corpus& c, const std::vector<Document>& docs, RetrievalMode mode) {
  SearchParams p;
  p.mode = mode;
  std::vector<std::vector<uint64_t>> out;
  for (const Document& d : docs) {
    auto hits = c.search(d.title, 7, ReadScope::everything(), p);
    EXPECT_TRUE(hits.ok()) << hits.status().to_string();
    std::vector<uint64_t> ids;
    if (hits.ok())
      for (const Hit& h : *hits) ids.push_back(h.chunk.id);
    out.push_back(std::move(ids));
  }
  return out;
}

TEST(CorpusReindex, RebuildsBothIndexesThatThenRankAsBefore) {
  Words w;
  TempDir dir;
  const auto docs = w.docs(61, 3);
  auto c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  ASSERT_TRUE(c->ingest(docs).ok());
  ASSERT_TRUE(c->remove_document(docs[4].id).ok());  // a hole in the chunk ids
  const auto lexical = rankings(*c, docs, RetrievalMode::kLexical);
  const auto dense = rankings(*c, docs, RetrievalMode::kDense);
  size_t found = 0;
  for (const auto& r : lexical) found += !r.empty();
  EXPECT_GE(found, docs.size() - 1);
  ASSERT_TRUE(c->reindex().ok());
  EXPECT_TRUE(c->check_consistency().ok());
  EXPECT_EQ(rankings(*c, docs, RetrievalMode::kLexical), lexical);
  EXPECT_EQ(rankings(*c, docs, RetrievalMode::kDense), dense);
  // And after a reopen (what reindex saved).
  c.reset();
  c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  EXPECT_TRUE(c->check_consistency().ok());
  EXPECT_EQ(rankings(*c, docs, RetrievalMode::kLexical), lexical);
}

TEST(CorpusReindex, ReadOnlyCorpusRefusesIt) {
  Words w;
  TempDir dir;
  { ASSERT_TRUE(std::move(Corpus::open(dir.path(), opts(), w.tok)).value()->ingest(w.docs(5, 1)).ok()); }
  CorpusOptions ro = opts();
  ro.read_only = true;
  auto c = std::move(Corpus::open(dir.path(), ro, w.tok)).value();
  EXPECT_FALSE(c->reindex().ok());
}

// A lexical index written by another term scheme (an older release) does not match this build's
// queries: the open rebuilds it from the store, whatever else it held — a shard of this layout
// marked with an older scheme, or the single database that releases up to scheme 3 kept at
// <data>/lexical itself.
TEST(CorpusReindex, LexicalIndexOfAnotherTermSchemeIsRebuiltAtOpen) {
  Words w;
  TempDir dir;
  const auto docs = w.docs(23, 5);
  std::vector<std::vector<uint64_t>> lexical;
  {
    auto c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
    ASSERT_TRUE(c->ingest(docs).ok());
    lexical = rankings(*c, docs, RetrievalMode::kLexical);
  }
  auto stale_doc = [] {
    Xapian::Document stale;
    stale.add_term("stalestaleword");
    stale.add_boolean_term("Q999999");
    stale.add_boolean_term("XO");
    stale.set_data("999999");
    return stale;
  };
  // A database at `path` holding only the stale document, marked with term scheme `scheme`.
  auto write_stale = [&](const std::string& path, const char* scheme) {
    Xapian::WritableDatabase db(path, Xapian::DB_CREATE);
    db.add_document(stale_doc());
    db.set_metadata("ragd_terms", scheme);
    db.set_metadata("ragd_seq", "1");
    db.commit();
  };
  {
    Xapian::WritableDatabase db(dir / "lexical/1", Xapian::DB_OPEN | Xapian::DB_NO_TERMLIST);
    EXPECT_EQ(db.get_metadata("ragd_terms"), "5");
    db.add_document(stale_doc());
    db.set_metadata("ragd_terms", "3");
    db.commit();
  }
  auto c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  EXPECT_TRUE(c->check_consistency().ok());  // the stale entry is gone: sizes agree
  EXPECT_EQ(rankings(*c, docs, RetrievalMode::kLexical), lexical);
  c.reset();
  for (const char* shard : {"0", "1"}) {
    Xapian::Database db(dir / ("lexical/" + std::string(shard)));
    EXPECT_EQ(db.get_metadata("ragd_terms"), "5") << shard;
    EXPECT_FALSE(db.term_exists("stalestaleword")) << shard;
    // Written without term lists (the rebuild made the shards anew).
    EXPECT_FALSE(std::filesystem::exists(dir / ("lexical/" + std::string(shard) + "/termlist.glass"))) << shard;
  }

  // The single-database layout of scheme 3 ("Q<id>" terms, ids as data).
  std::filesystem::remove_all(dir / "lexical");
  write_stale(dir / "lexical", "3");
  c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  EXPECT_TRUE(c->check_consistency().ok());
  EXPECT_EQ(rankings(*c, docs, RetrievalMode::kLexical), lexical);
  c.reset();
  EXPECT_FALSE(std::filesystem::exists(dir / "lexical/iamglass"));
  for (const char* shard : {"0", "1"}) EXPECT_GT(Xapian::Database(dir / ("lexical/" + std::string(shard))).get_doccount(), 0u) << shard;

  // Scheme 4: the same two shards, written with term lists.
  std::filesystem::remove_all(dir / "lexical");
  std::filesystem::create_directories(dir / "lexical");
  for (const char* shard : {"0", "1"}) write_stale(dir / ("lexical/" + std::string(shard)), "4");
  c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  EXPECT_TRUE(c->check_consistency().ok());
  EXPECT_EQ(rankings(*c, docs, RetrievalMode::kLexical), lexical);
  c.reset();
  for (const char* shard : {"0", "1"}) {
    EXPECT_FALSE(std::filesystem::exists(dir / ("lexical/" + std::string(shard) + "/termlist.glass"))) << shard;
    EXPECT_FALSE(Xapian::Database(dir / ("lexical/" + std::string(shard))).term_exists("stalestaleword")) << shard;
  }
}

// Removed chunks stay in the lexical index as tombstones (its shards have no term lists), counted
// in BM25's statistics; once they are a quarter of a shard (and at least a few thousand), the next
// open rebuilds the index: no tombstone left, rankings those of a full reindex.
TEST(CorpusReindex, LexicalIndexWithManyRemovedChunksIsCompactedAtOpen) {
  Words w;
  TempDir dir;
  std::mt19937_64 rng(41);
  std::vector<Document> docs;
  for (size_t i = 0; i < 700; ++i) {
    const size_t base = 200 + (i * 37) % (w.vocab.size() - 240);
    std::vector<std::string> topic(w.vocab.begin() + static_cast<long>(base), w.vocab.begin() + static_cast<long>(base + 37));
    Document d;
    d.id = "long-" + std::to_string(i);
    d.title = topic[0] + " " + topic[1];
    d.text = testing::make_text(rng, topic, w.common, 36);
    docs.push_back(std::move(d));
  }
  auto dead_entries = [&] {
    size_t n = 0;
    for (const char* shard : {"0", "1"}) {
      Xapian::Database db(dir / ("lexical/" + std::string(shard)));
      for (auto k = db.metadata_keys_begin("ragd_dead:"); k != db.metadata_keys_end("ragd_dead:"); ++k) ++n;
    }
    return n;
  };
  std::vector<Document> kept;
  {
    auto c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
    for (size_t b = 0; b < docs.size(); b += 100)
      ASSERT_TRUE(c->ingest(std::span<const Document>(docs).subspan(b, std::min<size_t>(100, docs.size() - b))).ok());
    const uint64_t total = c->stats().chunks;
    ASSERT_GT(total, 20000u) << "too few chunks for the compaction threshold";
    size_t i = 0;
    while (c->stats().chunks > total * 62 / 100) ASSERT_TRUE(*c->remove_document(docs[i++].id));
    kept.assign(docs.begin() + static_cast<long>(i), docs.end());
    EXPECT_TRUE(c->check_consistency().ok());  // tombstones are not counted as chunks
    // Removed documents are found by nothing, in every mode that reads the lexical index.
    for (RetrievalMode m : {RetrievalMode::kLexical, RetrievalMode::kHybrid}) {
      SearchParams p;
      p.mode = m;
      for (size_t j = 0; j < i; j += 37) {
        auto hits = c->search(docs[j].title, 10, ReadScope::everything(), p);
        ASSERT_TRUE(hits.ok());
        for (const Hit& h : *hits) EXPECT_NE(h.chunk.doc_id, docs[j].id);
      }
    }
  }
  EXPECT_GT(dead_entries(), 8192u);
  auto c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  EXPECT_TRUE(c->check_consistency().ok());
  const auto compacted = rankings(*c, kept, RetrievalMode::kLexical);
  c.reset();
  EXPECT_EQ(dead_entries(), 0u);
  c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  ASSERT_TRUE(c->reindex().ok());
  EXPECT_EQ(rankings(*c, kept, RetrievalMode::kLexical), compacted);
}

TEST(CorpusReindex, CorpusWithoutLexicalIndexSearchesDenseAndSaysWhatItLacks) {
  Words w;
  TempDir dir;
  const auto docs = w.docs(17, 9);
  CorpusOptions dense_only = opts();
  dense_only.lexical_index = false;
  {
    auto c = std::move(Corpus::open(dir.path(), dense_only, w.tok)).value();
    ASSERT_TRUE(c->ingest(docs).ok());
    EXPECT_EQ(c->default_mode(), RetrievalMode::kDense);
    auto hits = c->search(docs[3].title, 3, ReadScope::everything());
    ASSERT_TRUE(hits.ok()) << hits.status().to_string();
    EXPECT_FALSE(hits->empty());
    for (RetrievalMode m : {RetrievalMode::kLexical, RetrievalMode::kHybrid}) {
      SearchParams p;
      p.mode = m;
      auto r = c->search(docs[3].title, 3, ReadScope::everything(), p);
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
      EXPECT_NE(r.status().message().find("lexical_index = false"), std::string::npos) << r.status().message();
    }
    auto f = parse_metadata_filter(R"({"n": 1})");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    SearchParams p;
    p.mode = RetrievalMode::kDense;
    p.metadata = &*f;
    auto r = c->search(docs[3].title, 3, ReadScope::everything(), p);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("metadata filters"), std::string::npos) << r.status().message();
    ASSERT_TRUE(c->remove_document(docs[0].id).ok());
    EXPECT_TRUE(c->check_consistency().ok());
  }
  // Turned on again: the open builds the lexical index from the store.
  auto c = std::move(Corpus::open(dir.path(), opts(), w.tok)).value();
  EXPECT_TRUE(c->check_consistency().ok());
  SearchParams lex;
  lex.mode = RetrievalMode::kLexical;
  auto hits = c->search(docs[5].title, 3, ReadScope::everything(), lex);
  ASSERT_TRUE(hits.ok());
  ASSERT_FALSE(hits->empty());
  EXPECT_EQ((*hits)[0].chunk.doc_id, docs[5].id);
}

}  // namespace
}  // namespace ragd::retrieval
