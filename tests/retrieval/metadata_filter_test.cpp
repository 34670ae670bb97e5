// Metadata filters: the JSON form's parser (conditions, operators, errors that name the key), and
// filtered searches in every mode against a naive reference: every hit satisfies the filter, a
// filtered top-k holds k hits whenever k chunks qualify (the filter is inside the match, not a
// post-filter), and a lexical filtered top-k is exactly the unfiltered ranking restricted to the
// qualifying chunks.
#include "ragd/retrieval/metadata_filter.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "ragd/retrieval/corpus.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

using testing::TempDir;

TEST(MetadataFilterParse, ConditionsAndOperators) {
  auto f = parse_metadata_filter(
      R"({"lang":"en","year":{"gte":2020,"lt":2025},"tags":{"in":["a",1,true]},"draft":{"eq":false},"n":2021.0})");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(f->all.size(), 5u);
  EXPECT_EQ(f->all[0].key, "lang");
  EXPECT_EQ(f->all[0].values, std::vector<std::string>{"s:en"});
  EXPECT_EQ(f->all[1].op, MetadataCondition::Op::kRange);
  EXPECT_TRUE(f->all[1].in_range(2020));
  EXPECT_TRUE(f->all[1].in_range(2024.5));
  EXPECT_FALSE(f->all[1].in_range(2025));
  EXPECT_FALSE(f->all[1].in_range(2019.99));
  EXPECT_EQ(f->all[2].values, (std::vector<std::string>{"s:a", "n:1", "b:true"}));
  EXPECT_EQ(f->all[3].values, std::vector<std::string>{"b:false"});
  EXPECT_EQ(f->all[4].values, std::vector<std::string>{"n:2021"});  // 2021.0 == 2021
  EXPECT_EQ(canonical_metadata_values("[\"x\",2021,false]"), (std::vector<std::string>{"s:x", "n:2021", "b:false"}));
  EXPECT_EQ(canonical_metadata_values("\"2021\""), std::vector<std::string>{"s:2021"});  // not the number
}

TEST(MetadataFilterParse, ErrorsNameTheKeyAndTheProblem) {
  auto err = [](const char* json) { return parse_metadata_filter(json).status().message(); };
  EXPECT_NE(err("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(err("{\"a\":").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err(R"({"year":{"gteq":1}})").find("filter key 'year': unknown operator 'gteq'"), std::string::npos);
  EXPECT_NE(err(R"({"year":{"gt":"x"}})").find("'gt' takes a number"), std::string::npos);
  EXPECT_NE(err(R"({"t":{"in":[]}})").find("'in' takes a non-empty list"), std::string::npos);
  EXPECT_NE(err(R"({"t":{"in":[[1]]}})").find("filter key 't'"), std::string::npos);
  EXPECT_NE(err(R"({"t":null})").find("filter key 't'"), std::string::npos);
  EXPECT_NE(err(R"({"t":{}})").find("names no operator"), std::string::npos);
  EXPECT_NE(err(R"({"t":{"eq":1,"gt":0}})").find("not both"), std::string::npos);
}

// A document's metadata as the reference evaluates it.
struct Meta {
  std::string lang;
  int year = 0;
  std::vector<std::string> tags;
};

bool passes(const Meta& m, const std::string& lang, int lo, int hi, const std::string& tag) {
  return m.lang == lang && m.year >= lo && m.year < hi && std::find(m.tags.begin(), m.tags.end(), tag) != m.tags.end();
}

TEST(MetadataFilterSearch, FilteredTopKIsTheBestKOfTheQualifyingChunksInEveryMode) {
  std::vector<std::string> vocab = testing::make_vocabulary(3000, 9);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  std::vector<std::string> common(vocab.begin(), vocab.begin() + 200);
  std::vector<std::string> topic(vocab.begin() + 200, vocab.begin() + 260);  // every document shares it
  std::mt19937_64 rng(31);
  const char* langs[] = {"en", "de", "fr"};
  const char* tags[] = {"red", "green", "blue", "gold"};
  std::vector<Document> docs;
  std::map<std::string, Meta> meta;
  for (int i = 0; i < 61; ++i) {
    Document d;
    d.id = "d" + std::to_string(i);
    d.title = "Doc " + std::to_string(i);
    d.text = testing::make_text(rng, topic, common, 2 + static_cast<int>(rng() % 3));
    Meta m;
    m.lang = langs[rng() % 3];
    m.year = 2000 + static_cast<int>(rng() % 30);
    for (const char* t : tags)
      if (rng() % 2) m.tags.push_back(t);
    std::string list = "[";
    for (size_t j = 0; j < m.tags.size(); ++j) list += (j ? ",\"" : "\"") + m.tags[j] + "\"";
    list += "]";
    d.metadata = {{"lang", "\"" + m.lang + "\""}, {"year", std::to_string(m.year)}, {"tags", list}};
    if (i % 5 == 0) d.tenant = "t1";  // some belong to a tenant: a shared-scope search never sees them
    meta[d.id] = m;
    docs.push_back(std::move(d));
  }
  TempDir dir;
  CorpusOptions o;
  o.chunker.chunk_tokens = 40;
  auto c = std::move(Corpus::open(dir.path(), o, tok)).value();
  ASSERT_TRUE(c->ingest(docs).ok());
  std::map<std::string, std::string> tenant_of;
  for (const auto& d : docs) tenant_of[d.id] = d.tenant;
  int full_dense = 0, full_lexical = 0;  // trials where k chunks qualified: the test is not vacuous
  // The qualifying chunks, by the reference.
  for (int trial = 0; trial < 12; ++trial) {
    const std::string lang = langs[trial % 3];
    const int lo = 2000 + static_cast<int>(rng() % 15), hi = lo + 5 + static_cast<int>(rng() % 15);
    const std::string tag = tags[rng() % 4];
    const std::string json = R"({"lang":")" + lang + R"(","year":{"gte":)" + std::to_string(lo) + R"(,"lt":)" +
                             std::to_string(hi) + R"(},"tags":{"in":[")" + tag + R"("]}})";
    auto f = parse_metadata_filter(json);
    ASSERT_TRUE(f.ok());
    const ReadScope scope = trial % 2 ? ReadScope::tenant("t1") : ReadScope::shared_only();
    auto visible = [&](const std::string& id) { return tenant_of[id].empty() || (trial % 2 && tenant_of[id] == "t1"); };
    size_t qualifying = 0;
    for (const auto& d : docs)
      if (passes(meta[d.id], lang, lo, hi, tag) && visible(d.id))
        qualifying += c->get_document(d.id, d.tenant).value()->chunk_ids.size();
    const std::string query = topic[rng() % topic.size()] + " " + topic[rng() % topic.size()] + " " + common[rng() % 200];
    for (RetrievalMode mode : {RetrievalMode::kLexical, RetrievalMode::kDense, RetrievalMode::kHybrid}) {
      SCOPED_TRACE(json + " mode " + std::string(enum_name(mode)) + " tenant " + std::to_string(trial % 2));
      SearchParams p;
      p.mode = mode;
      p.metadata = &*f;
      const int k = 5;
      auto hits = c->search(query, k, scope, p);
      ASSERT_TRUE(hits.ok()) << hits.status().to_string();
      for (const auto& h : *hits) {
        EXPECT_TRUE(passes(meta[h.chunk.doc_id], lang, lo, hi, tag)) << h.chunk.doc_id;
        EXPECT_TRUE(visible(h.chunk.doc_id)) << h.chunk.doc_id;
      }
      // The vector search ranks every chunk: k hits whenever k qualify (hybrid holds the dense list).
      if (mode != RetrievalMode::kLexical)
        EXPECT_EQ(hits->size(), std::min<size_t>(k, qualifying)) << "qualifying " << qualifying;
      if (mode == RetrievalMode::kDense && qualifying >= static_cast<size_t>(k)) ++full_dense;
      if (mode == RetrievalMode::kLexical) {
        // BM25 ranks the chunks that hold a query word: the reference is the unfiltered ranking
        // (all of it: k = 1000 > the corpus's chunks) restricted to the qualifying chunks.
        SearchParams all;
        all.mode = mode;
        auto wide = c->search(query, 1000, scope, all);
        ASSERT_TRUE(wide.ok());
        std::vector<uint64_t> want;
        for (const auto& h : *wide)
          if (passes(meta[h.chunk.doc_id], lang, lo, hi, tag) && want.size() < static_cast<size_t>(k)) want.push_back(h.chunk.id);
        std::vector<uint64_t> got;
        for (const auto& h : *hits) got.push_back(h.chunk.id);
        EXPECT_EQ(got, want);
        if (want.size() == static_cast<size_t>(k)) ++full_lexical;
      }
    }
  }
  EXPECT_GE(full_dense, 3);
  EXPECT_GE(full_lexical, 3);
  // A condition no document meets: no hits, in every mode; the file-derived fields filter too.
  auto none = parse_metadata_filter(R"({"lang":"xx"})");
  auto fmt = parse_metadata_filter(R"({"path":"d3"})");
  for (RetrievalMode mode : {RetrievalMode::kLexical, RetrievalMode::kDense, RetrievalMode::kHybrid}) {
    SearchParams p;
    p.mode = mode;
    p.metadata = &*none;
    EXPECT_TRUE(c->search(topic[0], 5, ReadScope::everything(), p)->empty());
    p.metadata = &*fmt;
    auto h = c->search(topic[0] + " " + topic[1], 50, ReadScope::everything(), p);
    ASSERT_TRUE(h.ok());
    ASSERT_FALSE(h->empty());
    for (const auto& x : *h) EXPECT_EQ(x.chunk.doc_id, "d3");
  }
}

}  // namespace
}  // namespace ragd::retrieval
