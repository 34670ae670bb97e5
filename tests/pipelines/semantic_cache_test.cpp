// Semantic reuse of answers (semantic_cache.h, [semantic_cache] pipelines): the cache against a
// brute-force reference (best cosine at or above the threshold, per key); then through the
// executor: a repeated or re-punctuated question gets the earlier answer without a step (usage
// says hit, the tokens are the earlier answer's), while another tenant, another cache_salt,
// another question (other passages), sampling, and a changed or removed document all miss — and
// the stats count hits, misses, inserts and invalidations. The grounding check: against a
// reference that also compares the grounded term sets, and through the executor, where a question
// one number apart (a near-miss its embedding cannot tell) misses with the check and hits without.
#include "executor_fixture.h"

#include "semantic_cache.h"

namespace ragd::pipelines {
namespace {

std::vector<float> unit(std::vector<float> v) {
  double n = 0;
  for (float x : v) n += static_cast<double>(x) * x;
  for (float& x : v) x = static_cast<float>(x / std::sqrt(n));
  return v;
}

TEST(SemanticCacheUnit, BestAboveThresholdPerKeyLruAndInvalidation) {
  std::mt19937_64 rng(9);
  std::normal_distribution<float> g;
  SemanticCache c(50);
  struct Ref {
    std::string key;
    std::vector<float> e;
    int32_t tag;
    std::string doc;
  };
  std::vector<Ref> ref;
  const std::vector<uint64_t> ids_a = {3, 1, 2}, ids_b = {1, 2};
  for (int i = 0; i < 40; ++i) {
    std::vector<float> e(7);
    for (float& x : e) x = g(rng);
    e = unit(e);
    const std::string key = SemanticCache::key(i % 2 ? "t1" : "t2", "", "p", i % 3 ? std::span<const uint64_t>(ids_a) : std::span<const uint64_t>(ids_b));
    c.insert(key, e, "q" + std::to_string(i), {i}, "stop", {"doc-" + std::to_string(i % 5)});
    ref.push_back({key, e, i, "doc-" + std::to_string(i % 5)});
  }
  EXPECT_EQ(SemanticCache::key("t1", "", "p", ids_a), SemanticCache::key("t1", "", "p", std::vector<uint64_t>{1, 2, 3}));
  EXPECT_NE(SemanticCache::key("t1", "s", "p", ids_a), SemanticCache::key("t1s", "", "p", ids_a));
  for (int q = 0; q < 200; ++q) {
    std::vector<float> e(7);
    for (float& x : e) x = g(rng);
    const Ref& near = ref[rng() % ref.size()];
    if (q % 2) for (size_t k = 0; k < 7; ++k) e[k] = near.e[k] + 0.1f * e[k];
    e = unit(e);
    const double th = q % 4 == 0 ? 0.5 : 0.95;
    const std::string& key = near.key;
    double best = -2;
    int32_t tag = -1;
    for (const Ref& r : ref) {
      if (r.key != key) continue;
      double d = 0;
      for (size_t k = 0; k < 7; ++k) d += static_cast<double>(r.e[k]) * e[k];
      if (d > best) best = d, tag = r.tag;
    }
    auto hit = c.lookup(key, e, th);
    ASSERT_EQ(hit.has_value(), best >= th) << q;
    if (hit) {
      EXPECT_EQ(hit->tokens, std::vector<int32_t>{tag});
      EXPECT_NEAR(hit->similarity, best, 1e-5);
    }
  }
  // Invalidation by document, then eviction of the least recently used beyond the bound.
  const size_t before = c.stats().entries;
  const std::vector<std::string> gone = {"doc-1"};
  EXPECT_EQ(c.invalidate(gone), 8u);
  EXPECT_EQ(c.stats().entries, before - 8);
  EXPECT_FALSE(c.lookup(ref[1].key, ref[1].e, 0.999).has_value()) << "doc-1's answer went";
  for (int i = 0; i < 30; ++i) c.insert("k", unit({1, float(i), 0, 0, 0, 0, 0}), "", {i}, "stop", {});
  EXPECT_EQ(c.stats().entries, 50u);
  EXPECT_GT(c.stats().evicted, 0u);
}

TEST(SemanticCacheUnit, GroundingComparesTermSets) {
  // grounded_terms against a naive intersection.
  const std::vector<std::string> q = {"11", "erupt", "lava", "magma", "zeta"};
  const std::vector<std::string> p = {"10", "11", "erupt", "lava", "notes", "volcano"};
  std::vector<std::string> naive;
  for (const std::string& t : q)
    if (std::find(p.begin(), p.end(), t) != p.end()) naive.push_back(t);
  EXPECT_EQ(SemanticCache::grounded_terms("", q, p), naive);
  // Question words count, once each, in order with the terms.
  std::vector<std::string> asked = naive;
  asked.insert(asked.end(), {"?how", "?many", "?who"});
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(SemanticCache::grounded_terms("Who? How many... who-knows", q, p), asked);
  // Negations, "n't" included; an apostrophe elsewhere is not one.
  const std::vector<std::string> none;
  EXPECT_EQ(SemanticCache::grounded_terms("isn't it", none, none), std::vector<std::string>{"?not"});
  EXPECT_EQ(SemanticCache::grounded_terms("DOESN'T work without it", none, none), (std::vector<std::string>{"?not", "?without"}));
  EXPECT_TRUE(SemanticCache::grounded_terms("the cat's n'tx own'td", none, none).empty());
  // Lookups with term sets: the best cosine among entries of the same key AND the same set.
  std::mt19937_64 rng(17);
  std::normal_distribution<float> g;
  const std::vector<std::vector<std::string>> sets = {{}, {"a"}, {"a", "b"}, {"b"}, {"a", "c"}};
  SemanticCache c(1000);
  struct Ref {
    std::vector<float> e;
    size_t set;
    int32_t tag;
  };
  std::vector<Ref> ref;
  for (int i = 0; i < 60; ++i) {
    std::vector<float> e(5);
    for (float& x : e) x = g(rng);
    e = unit(e);
    const size_t set = rng() % sets.size();
    c.insert("k", e, "", {i}, "stop", {}, sets[set]);
    ref.push_back({e, set, i});
  }
  for (int n = 0; n < 300; ++n) {
    std::vector<float> e(5);
    for (float& x : e) x = g(rng);
    e = unit(e);
    const size_t set = rng() % sets.size();
    const bool check = n % 3 != 0;
    const double th = n % 2 ? 0.3 : 0.8;
    double best = -2;
    int32_t tag = -1;
    for (const Ref& r : ref) {
      if (check && r.set != set) continue;
      double d = 0;
      for (size_t k = 0; k < 5; ++k) d += static_cast<double>(r.e[k]) * e[k];
      if (d > best) best = d, tag = r.tag;
    }
    auto hit = c.lookup("k", e, th, check ? &sets[set] : nullptr);
    ASSERT_EQ(hit.has_value(), best >= th) << n;
    if (hit) EXPECT_EQ(hit->tokens, std::vector<int32_t>{tag}) << n;
  }
}

class SemanticCacheTest : public ExecutorTest {};

TEST_F(SemanticCacheTest, GroundingRefusesANearMissItsEmbeddingAccepts) {
  const std::string data = tmpdir("semantic-grounding");
  const std::string pdir = tmpdir("semantic-grounding-pipelines");
  const std::string body = "[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n[generation]\nmax_tokens = 5\n"
                           "[semantic_cache]\nthreshold = 0.5\n";
  fs::create_directories(pdir);
  write_file(fs::path(pdir) / "loose.toml", "[pipeline]\nname = \"loose\"\n" + body + "grounding = false\n");
  Runtime rt = open_with_pipeline(data, pdir, "grounded.toml", "[pipeline]\nname = \"grounded\"\n" + body);
  Executor& ex = *rt.executor;
  // doc-0 holds "entry number 11"; no passage holds 12. The two questions share every other word,
  // retrieve the same passages, and their hashing embeddings are close (cosine above 0.5).
  const std::string asked = "volcano lava magma eruption entry number 11";
  const std::string near = "volcano lava magma eruption entry number 12";
  const std::string reworded = "Please, the eruption of the volcano: lava and magma, entry number 11?";
  for (const char* p : {"grounded", "loose"}) {
    const RunOutput first = run(ex, p, asked, 5);
    ASSERT_TRUE(first.error.ok()) << first.error.to_string();
    EXPECT_EQ(first.usage.semantic_cache, "miss") << p;
    const RunOutput second = run(ex, p, near, 5);
    ASSERT_EQ(second.sources.size(), first.sources.size());
    for (size_t i = 0; i < first.sources.size(); ++i) EXPECT_EQ(second.sources[i].chunk_id, first.sources[i].chunk_id);
    EXPECT_EQ(second.usage.semantic_cache, std::string(p) == "loose" ? "hit" : "miss")
        << p << ": similarity " << second.usage.semantic_similarity;
    // Another question word, the same content words: another question.
    if (std::string(p) == "grounded") EXPECT_EQ(run(ex, p, "when " + asked, 5).usage.semantic_cache, "miss");
    // Another wording that keeps the passages' words: a hit either way.
    const RunOutput third = run(ex, p, reworded, 5);
    EXPECT_EQ(third.usage.semantic_cache, "hit") << p;
    EXPECT_EQ(third.usage.semantic_question, asked) << p;
  }
  close(rt);
  fs::remove_all(data);
  fs::remove_all(pdir);
}

TEST_F(SemanticCacheTest, HitsMissesIsolationAndInvalidation) {
  const std::string data = tmpdir("semantic");
  const std::string pdir = tmpdir("semantic-pipelines");
  Runtime rt = open_with_pipeline(data, pdir, "sem.toml",
                                  "[pipeline]\nname = \"sem\"\n[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n"
                                  "[generation]\nmax_tokens = 9\n[semantic_cache]\nthreshold = 0.9\n");
  Executor& ex = *rt.executor;
  auto ask = [&](const std::string& q, const std::function<void(RunRequest&)>& tweak = {}) {
    return run(ex, "sem", q, 9, [&](RunRequest& r) {
      r.sampling.max_tokens.reset();
      if (tweak) tweak(r);
    });
  };
  const std::string q = "notes about volcano lava magma eruption";
  const RunOutput first = ask(q);
  ASSERT_TRUE(first.error.ok()) << first.error.to_string();
  EXPECT_EQ(first.usage.semantic_cache, "miss");
  const RunOutput again = ask(q);
  EXPECT_EQ(again.usage.semantic_cache, "hit");
  EXPECT_EQ(again.tokens, first.tokens);
  EXPECT_EQ(again.finish, first.finish);
  EXPECT_NEAR(again.usage.semantic_similarity, 1.0, 1e-4);
  EXPECT_EQ(again.usage.semantic_question, q);
  EXPECT_EQ(again.usage.recomputed_tokens, 0) << "nothing prefilled";
  EXPECT_EQ(again.sources.size(), first.sources.size()) << "the passages still go out";
  // The same words, other case and punctuation: the same embedding here (hashing embedder).
  EXPECT_EQ(ask("Notes about volcano, lava, magma eruption?").usage.semantic_cache, "hit");
  // Another tenant, another salt: never the first tenant's answer.
  EXPECT_EQ(ask(q, [](RunRequest& r) { r.tenant = "other"; }).usage.semantic_cache, "miss");
  EXPECT_EQ(ask(q, [](RunRequest& r) { r.cache_salt = "s1"; }).usage.semantic_cache, "miss");
  // Another question (other passages): a miss; sampling: not looked up at all.
  EXPECT_EQ(ask("notes about glacier ice valley moraine").usage.semantic_cache, "miss");
  EXPECT_EQ(ask(q, [](RunRequest& r) { r.sampling.temperature = 0.8f; }).usage.semantic_cache, "");
  // Another max_tokens than the cut answer's: not that answer.
  if (first.finish == "length") EXPECT_EQ(ask(q, [](RunRequest& r) { r.sampling.max_tokens = 12; }).usage.semantic_cache, "miss");
  // The document changes: its answers go, and the question is answered anew.
  const ExecutorStats s1 = ex.stats();
  EXPECT_GE(s1.semantic_hits, 2u);
  EXPECT_GE(s1.semantic_inserts, 1u);
  std::vector<DocumentInput> docs = corpus_docs();
  docs[0].text += " A new survey of the crater was added.";
  ASSERT_TRUE(rt.documents->ingest({docs[0]}).ok());
  EXPECT_GT(ex.stats().semantic_invalidated, s1.semantic_invalidated);
  EXPECT_EQ(ask(q).usage.semantic_cache, "miss");
  EXPECT_EQ(ask(q).usage.semantic_cache, "hit");
  ASSERT_TRUE(rt.documents->remove(docs[0].id, "").ok());
  EXPECT_NE(ask(q).usage.semantic_cache, "hit");
  EXPECT_NE(ex.stats_json().find("\"semantic_cache\":{\"hits\":"), std::string::npos);
  close(rt);
  fs::remove_all(data);
  fs::remove_all(pdir);
}

}  // namespace
}  // namespace ragd::pipelines
