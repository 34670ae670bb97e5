// Semantic reuse of answers (semantic_cache.h, [semantic_cache] pipelines): the cache against a
// brute-force reference (best cosine at or above the threshold, per key); then through the
// executor: a repeated or re-punctuated question gets the earlier answer without a step (usage
// says hit, the tokens are the earlier answer's), while another tenant, another cache_salt,
// another question (other passages), sampling, and a changed or removed document all miss — and
// the stats count hits, misses, inserts and invalidations.
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

class SemanticCacheTest : public ExecutorTest {};

TEST_F(SemanticCacheTest, HitsMissesIsolationAndInvalidation) {
  const std::string data = tmpdir("semantic");
  const std::string pdir = tmpdir("semantic-pipelines");
  Runtime rt = open_with_pipeline(data, pdir, "sem.toml",
                                  "[pipeline]\nname = \"sem\"\n[retriever]\ntop_k = 2\n[reuse]\nmode = \"none\"\n"
                                  "[generation]\nmax_tokens = 9\n[semantic_cache]\nthreshold = 0.9\n");
  Executor& ex = *rt.executor;
  auto ask = [&](const std::string& q, const std::function<void(RunRequest&)>& tweak = {}) {
    return run(ex, "sem", q, 9, [&](RunRequest& r) {
      r.overrides.max_tokens.reset();
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
  EXPECT_EQ(ask(q, [](RunRequest& r) { r.overrides.temperature = 0.8f; }).usage.semantic_cache, "");
  // Another max_tokens than the cut answer's: not that answer.
  if (first.finish == "length") EXPECT_EQ(ask(q, [](RunRequest& r) { r.overrides.max_tokens = 12; }).usage.semantic_cache, "miss");
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
