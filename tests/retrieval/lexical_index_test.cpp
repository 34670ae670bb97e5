// LexicalIndex (Xapian BM25): stemming and stopwords, the title's weight, owners filtered inside
// the match (a filtered top-k holds k when k match), replace / remove by chunk id, commit and the
// sequence number across reopen; fuse_reciprocal_rank against a naive reference.
#include "lexical_index.h"

#include <algorithm>
#include <atomic>
#include <limits>
#include <thread>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <xapian.h>

#include "ragd/retrieval/corpus.h"
#include "ragd/retrieval/lexical_terms.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

std::vector<uint64_t> ids_of(const std::vector<LexicalHit>& hits) {
  std::vector<uint64_t> v;
  for (const auto& h : hits) v.push_back(h.chunk_id);
  return v;
}

TEST(LexicalIndex, StemsDropsStopwordsAndWeighsTheTitle) {
  auto x = LexicalIndex::open_memory();
  ASSERT_TRUE(x.ok());
  const std::vector<LexicalDoc> docs = {
      {1, "", "", "", "The parser reads JSON documents and returns Python objects."},
      {2, "", "", "", "Sockets connect two processes over a network."},
      {3, "", "Parsing dates", "", "Convert strings into datetime values."},
      {4, "", "", "", "It is what it is, and the rest is as it was."},
  };
  ASSERT_TRUE((*x)->add(docs).ok());
  EXPECT_EQ((*x)->size(), 4u);
  // "parse" meets "Parsing" (both stem to "pars"); "parser" is another stem.
  auto h = (*x)->search("how do I parse a date?", 5, std::nullopt);
  ASSERT_TRUE(h.ok());
  ASSERT_FALSE(h->empty());
  EXPECT_EQ((*h)[0].chunk_id, 3u);
  // Only stopwords: no hits, not every document.
  auto stop = (*x)->search("what is it and how is it", 5, std::nullopt);
  ASSERT_TRUE(stop.ok());
  EXPECT_TRUE(stop->empty()) << stop->size();
  // Plural and verb forms meet their stems.
  auto s = (*x)->search("socket connection", 5, std::nullopt);
  ASSERT_TRUE(s.ok());
  ASSERT_FALSE(s->empty());
  EXPECT_EQ((*s)[0].chunk_id, 2u);
  // The same words in the title rank above the body (the title counts twice).
  ASSERT_TRUE((*x)->add(std::vector<LexicalDoc>{{5, "", "", "", "Convert strings into datetime values. Parsing dates."}}).ok());
  auto t = (*x)->search("parsing dates", 2, std::nullopt);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[0].chunk_id, 3u);
  // Punctuation a query parser could choke on is plain words.
  auto odd = (*x)->search("what does \"-k\" AND (json OR", 5, std::nullopt);
  ASSERT_TRUE(odd.ok()) << odd.status().to_string();
}

// Operator terms: runs of punctuation holding an operator character, quotes and . , trimmed; prose
// punctuation makes none. A question quoting an operator finds the chunk that uses it.
TEST(LexicalIndex, OperatorTermsFindSyntaxTheWordsMiss) {
  using V = std::vector<std::string>;
  EXPECT_EQ(symbol_terms("the difference between \"$@\" and \"$*\"."), (V{"XS$@", "XS$*"}));
  EXPECT_EQ(symbol_terms("what does ;& or ;;& do"), (V{"XS;&", "XS;;&"}));
  EXPECT_EQ(symbol_terms("cmd > out 2>&1 && echo ok || exit"), (V{"XS>&", "XS&&", "XS||"}));
  EXPECT_EQ(symbol_terms("use ${#var} or ~+, see (this). Then: done), end;"), (V{"XS${#", "XS~+"}));
  EXPECT_EQ(symbol_terms("#!/bin/sh and **kwargs"), (V{"XS#!/", "XS**"}));
  EXPECT_EQ(symbol_terms("no operators here, just prose (and brackets)."), V{});
  EXPECT_EQ(symbol_terms("a run too long: $$$$$$$ ; single $ and é"), V{});  // 7 bytes; one byte; non-ASCII
  auto x = LexicalIndex::open_memory();
  ASSERT_TRUE(x.ok());
  const std::vector<LexicalDoc> docs = {
      {1, "", "", "", "Special parameters: $@ expands to the positional parameters, each a separate word."},
      {2, "", "", "", "The positional parameters are the arguments the script was given, each a word."},
      {3, "", "", "", "Lists: command1 && command2 runs command2 only when command1 returns zero."},
  };
  ASSERT_TRUE((*x)->add(docs).ok());
  auto h = (*x)->search("what does \"$@\" expand to", 3, std::nullopt);
  ASSERT_TRUE(h.ok());
  ASSERT_FALSE(h->empty());
  EXPECT_EQ((*h)[0].chunk_id, 1u);
  auto a = (*x)->search("&&", 3, std::nullopt);  // an operator alone is a query
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->size(), 1u);
  EXPECT_EQ((*a)[0].chunk_id, 3u);
}

// lexical_terms is the index's own term generation: sorted, each once, stopwords out, stemmed; every
// content word of a chunk's text gives terms among the text's and finds the chunk as a query.
TEST(LexicalIndex, LexicalTermsAreTheIndexTerms) {
  const std::string text = "The cats were running to the Running-track in 1999; cats RUN, the parser parses!";
  const std::vector<std::string> terms = lexical_terms(text);
  EXPECT_TRUE(std::is_sorted(terms.begin(), terms.end()));
  EXPECT_EQ(std::adjacent_find(terms.begin(), terms.end()), terms.end());
  for (const char* want : {"cat", "run", "1999", "track", "parser", "pars"})
    EXPECT_NE(std::find(terms.begin(), terms.end(), want), terms.end()) << want;
  for (const char* stop : {"the", "were", "to", "in"})
    EXPECT_EQ(std::find(terms.begin(), terms.end(), stop), terms.end()) << stop;
  auto x = LexicalIndex::open_memory();
  ASSERT_TRUE(x.ok());
  ASSERT_TRUE((*x)->add(std::vector<LexicalDoc>{{7, "", "", "", text}, {8, "", "", "", "unrelated words only"}}).ok());
  // Each content word of the text: its terms are among the text's, and as a query it finds the chunk.
  for (const char* w : {"cats", "running", "Running", "track", "1999", "parser", "parses", "RUN"}) {
    for (const std::string& t : lexical_terms(w)) EXPECT_TRUE(std::binary_search(terms.begin(), terms.end(), t)) << w;
    auto h = (*x)->search(w, 2, std::nullopt);
    ASSERT_TRUE(h.ok());
    ASSERT_EQ(h->size(), 1u) << w;
    EXPECT_EQ((*h)[0].chunk_id, 7u) << w;
  }
  EXPECT_TRUE(lexical_terms("what is the way to do it").empty());
}

// term_shares counts exactly inside the owner filter: random chunks of three owners over a small
// vocabulary, against a naive count of the chunks each scope sees.
TEST(LexicalIndex, TermSharesCountOnlyTheScopesChunks) {
  auto x = LexicalIndex::open_memory();
  ASSERT_TRUE(x.ok());
  std::mt19937_64 rng(23);
  const std::vector<std::string> vocab = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"};
  const std::vector<std::string> owner_names = {"", "t1", "t2"};
  std::vector<std::string> texts, owners;
  for (int i = 0; i < 157; ++i) {
    std::string t;
    for (const std::string& w : vocab)
      if (rng() % 3 == 0) t += w + " ";
    texts.push_back(t.empty() ? "hotel" : t);
    owners.push_back(owner_names[rng() % 3]);
  }
  std::vector<LexicalDoc> docs;
  for (size_t i = 0; i < texts.size(); ++i) docs.push_back({i + 1, owners[i], "", "", texts[i]});
  ASSERT_TRUE((*x)->add(docs).ok());
  std::vector<std::string> terms;
  for (const std::string& w : vocab) terms.push_back(lexical_terms(w).at(0));
  terms.push_back("absent");
  for (const std::optional<std::vector<std::string>>& scope :
       {std::optional<std::vector<std::string>>{}, std::optional<std::vector<std::string>>{{"", "t1"}},
        std::optional<std::vector<std::string>>{{"", "t2"}}, std::optional<std::vector<std::string>>{{"t2"}}}) {
    auto got = (*x)->term_shares(terms, scope);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->size(), terms.size());
    double seen = 0;
    std::vector<double> n(terms.size(), 0);
    for (size_t i = 0; i < texts.size(); ++i) {
      if (scope && std::find(scope->begin(), scope->end(), owners[i]) == scope->end()) continue;
      seen += 1;
      const std::vector<std::string> held = lexical_terms(texts[i]);
      for (size_t j = 0; j < terms.size(); ++j) n[j] += std::binary_search(held.begin(), held.end(), terms[j]);
    }
    for (size_t j = 0; j < terms.size(); ++j) EXPECT_DOUBLE_EQ((*got)[j], n[j] / seen) << terms[j];
  }
  // A scope that holds no chunk: every share 0.
  auto none = (*x)->term_shares(terms, std::vector<std::string>{"nobody"});
  ASSERT_TRUE(none.ok());
  for (double v : *none) EXPECT_EQ(v, 0.0);
}

// Owners are boolean terms inside the match: a tenant's top-k is the k best of its own and the
// shared chunks even when another tenant's chunks score higher, and never includes them.
TEST(LexicalIndex, OwnerFilterIsInsideTheMatchAndTopKStaysK) {
  auto x = LexicalIndex::open_memory();
  ASSERT_TRUE(x.ok());
  std::vector<std::string> texts;
  std::vector<LexicalDoc> docs;
  texts.reserve(90);
  for (int i = 0; i < 90; ++i) {
    // alpha's chunks repeat the query word most: they would fill a post-filtered top-k.
    const int reps = i < 30 ? 6 : 1;
    std::string t;
    for (int r = 0; r < reps; ++r) t += "kingfisher ";
    t += "filler text number " + std::to_string(i);
    texts.push_back(t);
  }
  const char* owners[] = {"alpha", "beta", ""};
  for (int i = 0; i < 90; ++i) docs.push_back({static_cast<uint64_t>(100 + i), owners[i / 30], "", "", texts[static_cast<size_t>(i)]});
  ASSERT_TRUE((*x)->add(docs).ok());
  auto beta = (*x)->search("kingfisher", 7, std::vector<std::string>{"", "beta"});
  ASSERT_TRUE(beta.ok());
  ASSERT_EQ(beta->size(), 7u);
  for (uint64_t id : ids_of(*beta)) EXPECT_GE(id, 130u) << "alpha's chunk in beta's results";
  auto shared = (*x)->search("kingfisher", 40, std::vector<std::string>{""});
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->size(), 30u);
  for (uint64_t id : ids_of(*shared)) EXPECT_GE(id, 160u);
  auto all = (*x)->search("kingfisher", 5, std::nullopt);
  ASSERT_TRUE(all.ok());
  for (uint64_t id : ids_of(*all)) EXPECT_LT(id, 130u);  // alpha's score highest
}

TEST(LexicalIndex, ReplaceRemoveCommitAndReopen) {
  testing::TempDir dir;
  const std::string path = (std::filesystem::path(dir.path()) / "lexical").string();
  {
    auto x = LexicalIndex::open(path);
    ASSERT_TRUE(x.ok()) << x.status().to_string();
    EXPECT_EQ((*x)->committed_seq(), 0u);
    ASSERT_TRUE((*x)->add(std::vector<LexicalDoc>{{7, "", "", "", "albatross over the ocean"}, {8, "t", "", "", "penguin on ice"}}).ok());
    // Chunk ids are never reused: adding one again (a replay of the store's log) leaves it as it is.
    ASSERT_TRUE((*x)->add(std::vector<LexicalDoc>{{7, "", "", "", "heron in the marsh"}}).ok());
    EXPECT_EQ((*x)->size(), 2u);
    EXPECT_TRUE((*x)->search("heron", 3, std::nullopt)->empty());
    EXPECT_EQ(ids_of(*(*x)->search("albatross", 3, std::nullopt)), std::vector<uint64_t>{7});
    ASSERT_TRUE((*x)->commit(41).ok());
    const uint64_t none[] = {99};
    ASSERT_TRUE((*x)->remove(none).ok());  // absent: ignored
    const uint64_t eight[] = {8};
    ASSERT_TRUE((*x)->remove(eight).ok());
    EXPECT_EQ((*x)->size(), 1u);
    EXPECT_FALSE(*(*x)->contains(8));
    EXPECT_TRUE(*(*x)->contains(7));
    EXPECT_FALSE(*(*x)->contains(99));
    EXPECT_TRUE((*x)->search("penguin", 3, std::nullopt)->empty());
    ASSERT_TRUE((*x)->remove(eight).ok());  // removed twice: still one tombstone
    EXPECT_EQ((*x)->size(), 1u);
    // Not committed: a reader of the committed state still sees chunk 8.
    auto ro = LexicalIndex::open_read_only(path);
    ASSERT_TRUE(ro.ok());
    EXPECT_EQ((*ro)->committed_seq(), 41u);
    EXPECT_EQ(ids_of(*(*ro)->search("penguin", 3, std::nullopt)), std::vector<uint64_t>{8});
    EXPECT_TRUE(*(*ro)->contains(8));
    EXPECT_FALSE((*ro)->add(std::vector<LexicalDoc>{{9, "", "", "", "x"}}).ok());
    ASSERT_TRUE((*x)->commit(42).ok());
  }
  {
    // The tombstone was committed with seq 42: a reader and a reopened writer both leave chunk 8 out.
    auto ro = LexicalIndex::open_read_only(path);
    ASSERT_TRUE(ro.ok());
    EXPECT_EQ((*ro)->size(), 1u);
    EXPECT_FALSE(*(*ro)->contains(8));
    EXPECT_TRUE((*ro)->search("penguin", 3, std::nullopt)->empty());
  }
  auto x = LexicalIndex::open(path);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ((*x)->committed_seq(), 42u);
  EXPECT_EQ((*x)->size(), 1u);
  EXPECT_FALSE(*(*x)->contains(8));
  EXPECT_TRUE((*x)->search("penguin", 3, std::nullopt)->empty());
  ASSERT_TRUE((*x)->clear().ok());
  EXPECT_EQ((*x)->size(), 0u);
  // Made anew: chunk 8 can be indexed again (a rebuild adds every stored chunk to the empty index).
  ASSERT_TRUE((*x)->add(std::vector<LexicalDoc>{{8, "", "", "", "penguin on ice"}}).ok());
  EXPECT_EQ(ids_of(*(*x)->search("penguin", 3, std::nullopt)), std::vector<uint64_t>{8});
  ASSERT_TRUE((*x)->commit(43).ok());
  x->reset();
  auto again = LexicalIndex::open(path);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->committed_seq(), 43u);
  EXPECT_EQ((*again)->size(), 1u);
  EXPECT_TRUE((*again)->format_current());
  EXPECT_EQ(LexicalIndex::open_read_only((std::filesystem::path(dir.path()) / "none").string()).status().code(), StatusCode::kNotFound);
}

// Removed chunks are tombstones (the shards have no term lists): on disk and in memory, every
// search, count and filter leaves them out inside the match — a top-k over a query whose best
// chunks were removed still holds k live chunks, term shares equal a naive count over the live
// chunks of the scope, the filter's allow-list holds no removed chunk — and compaction becomes due
// when tombstones reach a quarter of a shard.
TEST(LexicalIndex, RemovedChunksAreLeftOutInsideTheMatch) {
  testing::TempDir dir;
  std::mt19937_64 rng(91);
  const std::vector<std::string> vocab = {"wren", "robin", "thrush", "finch", "linnet", "siskin", "dunnock"};
  const std::vector<std::string> owner_names = {"", "t1", "t2"};
  const size_t n = 613;
  std::vector<std::string> texts, owners;
  std::vector<std::vector<std::pair<std::string, std::string>>> fields;
  for (size_t i = 0; i < n; ++i) {
    std::string t;
    // The first 120 chunks repeat "wren": they would fill a top-k that filtered after the match.
    for (int r = 0; r < (i < 120 ? 5 : 0); ++r) t += "wren ";
    for (const std::string& w : vocab)
      if (rng() % 3 == 0) t += w + " ";
    texts.push_back(t + "number " + std::to_string(i));
    owners.push_back(owner_names[rng() % 3]);
    fields.push_back({{"kind", i % 4 == 0 ? "s:a" : "s:b"}});
  }
  std::vector<LexicalDoc> docs;
  for (size_t i = 0; i < n; ++i) docs.push_back({i + 1, owners[i], "", "", texts[i], fields[i]});
  std::vector<uint64_t> removed;
  std::vector<bool> live(n, true);
  for (size_t i = 0; i < n; ++i)
    if (i < 120 || rng() % 5 == 0) removed.push_back(i + 1), live[i] = false;

  auto disk = LexicalIndex::open((std::filesystem::path(dir.path()) / "lexical").string());
  auto memory = LexicalIndex::open_memory();
  ASSERT_TRUE(disk.ok() && memory.ok());
  for (LexicalIndex* x : {disk->get(), memory->get()}) {
    ASSERT_TRUE(x->add(docs).ok());
    ASSERT_TRUE(x->remove(removed).ok());
    size_t n_live = 0;
    for (bool b : live) n_live += b;
    EXPECT_EQ(x->size(), n_live);
    // Top-k of the removed chunks' word: k live chunks, none removed.
    auto hits = x->search("wren", 25, std::nullopt);
    ASSERT_TRUE(hits.ok());
    EXPECT_EQ(hits->size(), 25u);
    for (uint64_t id : ids_of(*hits)) EXPECT_TRUE(live[id - 1]) << "removed chunk " << id << " returned";
    auto scoped = x->search("wren robin", 40, std::vector<std::string>{"t2"});
    ASSERT_TRUE(scoped.ok());
    for (uint64_t id : ids_of(*scoped)) EXPECT_TRUE(live[id - 1] && owners[id - 1] == "t2") << id;
    // Term shares: a naive count over the live chunks of each scope.
    std::vector<std::string> terms;
    for (const std::string& w : vocab) terms.push_back(lexical_terms(w).at(0));
    for (const std::optional<std::vector<std::string>>& scope :
         {std::optional<std::vector<std::string>>{}, std::optional<std::vector<std::string>>{{"", "t1"}}}) {
      auto got = x->term_shares(terms, scope);
      ASSERT_TRUE(got.ok());
      double seen = 0;
      std::vector<double> want(terms.size(), 0);
      for (size_t i = 0; i < n; ++i) {
        if (!live[i] || (scope && std::find(scope->begin(), scope->end(), owners[i]) == scope->end())) continue;
        seen += 1;
        const std::vector<std::string> held = lexical_terms(texts[i]);
        for (size_t j = 0; j < terms.size(); ++j) want[j] += std::binary_search(held.begin(), held.end(), terms[j]);
      }
      for (size_t j = 0; j < terms.size(); ++j) EXPECT_DOUBLE_EQ((*got)[j], want[j] / seen) << terms[j];
    }
    // The filter's allow-list: exactly the live chunks with kind a.
    MetadataFilter f;
    f.all.push_back({"kind", MetadataCondition::Op::kIn, {"s:a"}});
    auto allowed = x->matching(f, std::nullopt);
    ASSERT_TRUE(allowed.ok());
    std::vector<uint64_t> want_allowed;
    for (size_t i = 0; i < n; ++i)
      if (live[i] && i % 4 == 0) want_allowed.push_back(i + 1);
    EXPECT_EQ(*allowed, want_allowed);
    EXPECT_FALSE(x->compaction_due());  // 120 + ~100 tombstones: below the minimum count
  }

  // Compaction: due once a shard's tombstones reach the minimum and a quarter of its documents.
  auto big = LexicalIndex::open((std::filesystem::path(dir.path()) / "big").string());
  ASSERT_TRUE(big.ok());
  std::vector<LexicalDoc> many;
  std::vector<std::string> many_texts;
  for (uint64_t i = 0; i < 40000; ++i) many_texts.push_back("egret " + std::to_string(i % 97));
  for (uint64_t i = 0; i < 40000; ++i) many.push_back({i, "", "", "", many_texts[i]});
  ASSERT_TRUE((*big)->add(many).ok());
  std::vector<uint64_t> first;
  for (uint64_t i = 0; i < 6000; ++i) first.push_back(i);  // 3,000 per shard of 20,000: below the minimum
  ASSERT_TRUE((*big)->remove(first).ok());
  EXPECT_FALSE((*big)->compaction_due());
  std::vector<uint64_t> second;
  for (uint64_t i = 6000; i < 9000; ++i) second.push_back(i);  // 4,500 per shard: below a quarter
  ASSERT_TRUE((*big)->remove(second).ok());
  EXPECT_FALSE((*big)->compaction_due());
  std::vector<uint64_t> third;
  for (uint64_t i = 9000; i < 10200; ++i) third.push_back(i);  // 5,100 per shard: past a quarter
  ASSERT_TRUE((*big)->remove(third).ok());
  EXPECT_TRUE((*big)->compaction_due());
  EXPECT_EQ((*big)->size(), 40000u - 10200u);
  auto egrets = (*big)->search("egret 5", 50, std::nullopt);
  ASSERT_TRUE(egrets.ok());
  EXPECT_EQ(egrets->size(), 50u);
  for (uint64_t id : ids_of(*egrets)) EXPECT_GE(id, 10200u);
  ASSERT_TRUE((*big)->clear().ok());
  EXPECT_FALSE((*big)->compaction_due());
}

// The two shards (chunk id parity) are one index to a search: BM25 statistics of the whole (a
// chunk scores the same whichever shard holds it and whatever the other holds), ties in chunk id
// order across shards, a filtered top-k that draws from both, ids past Xapian's document numbers
// refused, and a commit interrupted between the shards reported as the lower sequence number.
TEST(LexicalIndex, ShardsSearchAsOneIndex) {
  auto x = LexicalIndex::open_memory();
  ASSERT_TRUE(x.ok());
  std::vector<LexicalDoc> docs;
  // Ten identical chunks (ids 3..12, both parities) tie; a shared filler makes "kestrel" rare.
  for (uint64_t id = 3; id < 13; ++id) docs.push_back({id, id % 3 == 0 ? "t" : "", "", "", "kestrel hovering above"});
  std::vector<std::string> filler;
  for (uint64_t id = 100; id < 160; ++id) filler.push_back("field mouse number " + std::to_string(id));
  for (uint64_t id = 100; id < 160; ++id) docs.push_back({id, "", "", "", filler[id - 100]});
  ASSERT_TRUE((*x)->add(docs).ok());
  auto hits = (*x)->search("kestrel", 10, std::nullopt);
  ASSERT_TRUE(hits.ok());
  EXPECT_EQ(ids_of(*hits), (std::vector<uint64_t>{3, 4, 5, 6, 7, 8, 9, 10, 11, 12}));
  for (const auto& h : *hits) EXPECT_DOUBLE_EQ(h.score, (*hits)[0].score);
  // Tenant "t" holds 3, 6, 9, 12 (both shards): its top 4 is all of them.
  auto own = (*x)->search("kestrel", 4, std::vector<std::string>{"t"});
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(ids_of(*own), (std::vector<uint64_t>{3, 6, 9, 12}));
  // The same chunks in one shard score as they do spread over two: statistics are global.
  auto y = LexicalIndex::open_memory();
  ASSERT_TRUE(y.ok());
  std::vector<LexicalDoc> even;
  for (uint64_t i = 0; i < docs.size(); ++i) even.push_back({2 * (i + 1), "", "", "", docs[i].text});
  ASSERT_TRUE((*y)->add(even).ok());
  auto one_shard = (*y)->search("kestrel", 1, std::nullopt);
  ASSERT_TRUE(one_shard.ok());
  ASSERT_EQ(one_shard->size(), 1u);
  EXPECT_NEAR((*one_shard)[0].score, (*hits)[0].score, 1e-9);

  // On disk (the in-memory backend keeps a slot per document number up to the highest).
  testing::TempDir dir;
  auto z = LexicalIndex::open((std::filesystem::path(dir.path()) / "lexical").string());
  ASSERT_TRUE(z.ok());
  const uint64_t limit = std::numeric_limits<uint32_t>::max() - 1;  // the last chunk id a document number holds
  auto big = (*z)->add(std::vector<LexicalDoc>{{limit + 1, "", "", "", "too far"}});
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("beyond"), std::string::npos) << big.message();
  ASSERT_TRUE((*z)->add(std::vector<LexicalDoc>{{limit, "", "", "", "osprey"}, {limit - 1, "", "", "", "osprey"}, {4, "", "", "", "osprey"}}).ok());
  EXPECT_EQ(ids_of(*(*z)->search("osprey", 3, std::nullopt)), (std::vector<uint64_t>{4, limit - 1, limit}));
  EXPECT_TRUE(*(*z)->contains(limit));
  EXPECT_FALSE(*(*z)->contains(limit + 1));
}

TEST(LexicalIndex, CommitBetweenShardsReportsTheLowerSequence) {
  testing::TempDir dir;
  const std::string path = (std::filesystem::path(dir.path()) / "lexical").string();
  {
    auto x = LexicalIndex::open(path);
    ASSERT_TRUE(x.ok());
    ASSERT_TRUE((*x)->add(std::vector<LexicalDoc>{{1, "", "", "", "gannet"}, {2, "", "", "", "gannet"}}).ok());
    ASSERT_TRUE((*x)->commit(5).ok());
    ASSERT_TRUE((*x)->add(std::vector<LexicalDoc>{{3, "", "", "", "gannet"}}).ok());
    ASSERT_TRUE((*x)->commit(6).ok());
  }
  {
    // As if the process died after shard 0 committed seq 6 and before shard 1 did.
    Xapian::WritableDatabase shard1(path + "/1", Xapian::DB_OPEN | Xapian::DB_NO_TERMLIST);
    EXPECT_EQ(shard1.get_metadata("ragd_seq"), "6");
    shard1.set_metadata("ragd_seq", "5");
    shard1.commit();
  }
  auto x = LexicalIndex::open(path);
  ASSERT_TRUE(x.ok());
  EXPECT_EQ((*x)->committed_seq(), 5u);
  EXPECT_EQ(ids_of(*(*x)->search("gannet", 5, std::nullopt)), (std::vector<uint64_t>{1, 2, 3}));
}

// Two threads adding disjoint chunks at once (the ingest path: a writer thread and the ingest
// thread helping it) leave the same index as one thread adding them all.
TEST(LexicalIndex, ConcurrentAddsEqualOneThreadsAdds) {
  std::mt19937 rng(11);
  const std::vector<std::string> vocab = {"tern", "skua", "puffin", "fulmar", "shag", "eider", "petrel", "auk"};
  std::vector<std::string> texts;
  for (int i = 0; i < 700; ++i) {
    std::string t;
    for (int w = 0; w < 6; ++w) t += vocab[rng() % vocab.size()] + " ";
    texts.push_back(t);
  }
  std::vector<LexicalDoc> docs;
  for (size_t i = 0; i < texts.size(); ++i) docs.push_back({i, i % 5 == 0 ? "t" : "", "", "", texts[i]});
  auto serial = LexicalIndex::open_memory();
  auto parallel = LexicalIndex::open_memory();
  ASSERT_TRUE(serial.ok() && parallel.ok());
  ASSERT_TRUE((*serial)->add(docs).ok());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t b; (b = next.fetch_add(16)) < docs.size();)
      ASSERT_TRUE((*parallel)->add(std::span<const LexicalDoc>(docs).subspan(b, std::min<size_t>(16, docs.size() - b))).ok());
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  EXPECT_EQ((*parallel)->size(), docs.size());
  for (const std::string& q : vocab) {
    auto want = (*serial)->search(q + " " + vocab[(q.size() + 3) % vocab.size()], 50, std::nullopt);
    auto got = (*parallel)->search(q + " " + vocab[(q.size() + 3) % vocab.size()], 50, std::nullopt);
    ASSERT_TRUE(want.ok() && got.ok());
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_EQ((*got)[i].chunk_id, (*want)[i].chunk_id) << q << " #" << i;
      EXPECT_DOUBLE_EQ((*got)[i].score, (*want)[i].score) << q << " #" << i;
    }
  }
}

// Naive RRF: sum over lists of weight / (k0 + rank) for the first `candidates` of each.
TEST(Fusion, ReciprocalRankFusionMatchesANaiveReference) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<Neighbor> dense, lexical;
    const int nd = static_cast<int>(rng() % 40), nl = static_cast<int>(rng() % 40);
    std::vector<uint64_t> pool(60);
    for (size_t i = 0; i < pool.size(); ++i) pool[i] = 1000 + i;
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int i = 0; i < nd; ++i) dense.push_back({pool[static_cast<size_t>(i)], 1.0f - 0.01f * static_cast<float>(i)});
    std::shuffle(pool.begin(), pool.end(), rng);
    for (int i = 0; i < nl; ++i) lexical.push_back({pool[static_cast<size_t>(i)], 30.0f - static_cast<float>(i)});
    HybridOptions o;
    o.candidates = 1 + static_cast<int>(rng() % 30);
    o.rrf_k = 1 + static_cast<int>(rng() % 80);
    o.lexical_weight = 0.5 + (rng() % 5);
    const int k = 1 + static_cast<int>(rng() % 12);
    std::map<uint64_t, double> want;
    const int n = std::max(k, o.candidates);
    for (int r = 0; r < std::min(nd, n); ++r) want[dense[static_cast<size_t>(r)].id] += 1.0 / (o.rrf_k + r + 1);
    for (int r = 0; r < std::min(nl, n); ++r) want[lexical[static_cast<size_t>(r)].id] += o.lexical_weight / (o.rrf_k + r + 1);
    auto got = fuse_reciprocal_rank(dense, lexical, o, k);
    ASSERT_LE(got.size(), std::min<size_t>(want.size(), static_cast<size_t>(2 * k)));
    if (want.size() <= static_cast<size_t>(2 * k)) ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(want.count(got[i].id));
      EXPECT_NEAR(got[i].score, want[got[i].id], 1e-6);
      if (i > 0) EXPECT_GE(got[i - 1].score, got[i].score);
    }
    // Nothing left out scores above the last one kept.
    if (!got.empty())
      for (const auto& [id, sc] : want)
        if (std::none_of(got.begin(), got.end(), [&](const Neighbor& g) { return g.id == id; }))
          EXPECT_LE(sc, got.back().score + 1e-6);
  }
}

// Naive weighted fusion: share x BM25 / best BM25 + (1 - share) x cosine over the first
// `candidates` of each list; a chunk missing from a list gets that list's last (lowest) score.
TEST(Fusion, WeightedFusionMatchesANaiveReference) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Neighbor> dense, lexical;
    const int nd = static_cast<int>(rng() % 40), nl = static_cast<int>(rng() % 40);
    std::vector<uint64_t> pool(60);
    for (size_t i = 0; i < pool.size(); ++i) pool[i] = 1000 + i;
    std::shuffle(pool.begin(), pool.end(), rng);
    float c = 1.0f;
    for (int i = 0; i < nd; ++i) dense.push_back({pool[static_cast<size_t>(i)], c -= 0.03f * static_cast<float>(rng() % 3)});
    std::shuffle(pool.begin(), pool.end(), rng);
    float b = 40.0f;
    for (int i = 0; i < nl; ++i) lexical.push_back({pool[static_cast<size_t>(i)], b -= static_cast<float>(rng() % 4) * 0.7f});
    HybridOptions o;
    o.fusion = HybridFusion::kWeighted;
    o.candidates = 1 + static_cast<int>(rng() % 30);
    o.lexical_share = static_cast<double>(rng() % 11) / 10.0;
    const int k = 1 + static_cast<int>(rng() % 12);
    const size_t n = static_cast<size_t>(std::max(k, o.candidates));
    const size_t ud = std::min(dense.size(), n), ul = std::min(lexical.size(), n);
    double best = 0;
    for (size_t r = 0; r < ul; ++r) best = std::max(best, static_cast<double>(lexical[r].score));
    std::map<uint64_t, double> dscore, lscore;
    for (size_t r = 0; r < ud; ++r) dscore[dense[r].id] = dense[r].score;
    for (size_t r = 0; r < ul; ++r) lscore[lexical[r].id] = lexical[r].score / best;
    std::map<uint64_t, double> want;
    for (const auto* m : {&dscore, &lscore})
      for (const auto& [id, v] : *m) {
        const double d = dscore.count(id) ? dscore[id] : (ud ? dense[ud - 1].score : 0.0);
        const double l = lscore.count(id) ? lscore[id] : (ul ? lexical[ul - 1].score / best : 0.0);
        want[id] = o.lexical_share * l + (1 - o.lexical_share) * d;
      }
    auto got = fuse_hybrid(dense, lexical, o, k);
    ASSERT_LE(got.size(), std::min<size_t>(want.size(), static_cast<size_t>(2 * k)));
    if (want.size() <= static_cast<size_t>(2 * k)) ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_TRUE(want.count(got[i].id)) << "trial " << trial;
      EXPECT_NEAR(got[i].score, want[got[i].id], 1e-5) << "trial " << trial;
      if (i > 0) EXPECT_GE(got[i - 1].score, got[i].score);
    }
    if (!got.empty())
      for (const auto& [id, sc] : want)
        if (std::none_of(got.begin(), got.end(), [&](const Neighbor& g) { return g.id == id; }))
          EXPECT_LE(sc, got.back().score + 1e-5) << "trial " << trial;
  }
  // Share 1: the lexical order; share 0: the dense order (chunks in both lists).
  std::vector<Neighbor> d = {{1, 0.9f}, {2, 0.8f}, {3, 0.7f}}, l = {{3, 9.0f}, {2, 8.0f}, {1, 7.0f}};
  HybridOptions o;
  o.lexical_share = 1.0;
  auto lex = fuse_weighted(d, l, o, 3);
  ASSERT_EQ(lex.size(), 3u);
  EXPECT_EQ(lex[0].id, 3u);
  EXPECT_EQ(lex[2].id, 1u);
  o.lexical_share = 0.0;
  auto den = fuse_weighted(d, l, o, 3);
  EXPECT_EQ(den[0].id, 1u);
  EXPECT_EQ(den[2].id, 3u);
}

}  // namespace
}  // namespace ragd::retrieval
