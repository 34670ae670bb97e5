// Whole-model forward against the independent double reference (tiny_model.h), and the runtime's
// batching / paging / sharing invariants: batched step == one at a time, shared prefix (fork +
// copy-on-write) == independent, every block size == contiguous, pool exhaustion changes nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

#include "model_fixture.h"
#include "ragd/engine/model.h"
#include "tiny_model.h"

namespace ragd::engine {
namespace {

using namespace testing;  // model_fixture.h / tiny_model.h: Fixture, Reference, random_tokens, err, tolerances

class ModelVsReference : public ::testing::TestWithParam<Variant> {};

TEST_P(ModelVsReference, PrefillChunksAndDecodesMatch) {
  Fixture f(GetParam());
  ASSERT_TRUE(f.model);
  auto toks = random_tokens(45, 7);
  std::vector<std::vector<double>> ref;
  Reference(f.cfg, f.w).run(toks, &ref);
  BlockTable t;
  // Prefill 33 tokens with all logits, then a 7-token chunk (attends to the cached 33), then decodes.
  StepOutput a = f.step(t, std::span(toks).subspan(0, 33), SeqStep::Logits::kAll);
  ASSERT_EQ(a.logits.size(), 33u * 97);
  for (int r = 0; r < 33; ++r) EXPECT_LT(err(a.row(r), ref[r]), kRefTol) << "row " << r;
  StepOutput b = f.step(t, std::span(toks).subspan(33, 7), SeqStep::Logits::kAll);
  for (int r = 0; r < 7; ++r) EXPECT_LT(err(b.row(r), ref[33 + r]), kRefTol) << "chunk row " << r;
  for (int i = 40; i < 45; ++i) {
    StepOutput d = f.step(t, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast);
    ASSERT_EQ(d.logits.size(), 97u);
    EXPECT_LT(err(d.row(0), ref[i]), kRefTol) << "decode " << i;
  }
  EXPECT_EQ(t.num_tokens(), 45);
  t.release(f.model->kv_pool());
}

INSTANTIATE_TEST_SUITE_P(Variants, ModelVsReference,
                         ::testing::Values(Variant::kLlama, Variant::kQwen2Bias, Variant::kTied, Variant::kLlama3Rope,
                                           Variant::kBf16, Variant::kLinearRope));

// Long context: chunked prefill (256-token chunks over paged KV) and decodes at ~600 tokens, where
// the decode kernel splits each sequence's keys into partitions merged by LSE (with >= 2 threads).
TEST(Model, LongContextChunkedPrefillAndSplitDecode) {
  Fixture f(Variant::kQwen2Bias, 16);
  auto toks = random_tokens(603, 71);
  std::vector<std::vector<double>> ref;
  Reference(f.cfg, f.w).run(toks, &ref);
  BlockTable t;
  for (int c0 = 0; c0 < 600; c0 += 256) {
    const int n = std::min(256, 600 - c0);
    StepOutput o = f.step(t, std::span(toks).subspan(c0, n), SeqStep::Logits::kLast);
    EXPECT_LT(err(o.row(0), ref[c0 + n - 1]), kRefTol) << "chunk at " << c0;
  }
  for (int i = 600; i < 603; ++i) {
    StepOutput d = f.step(t, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast);
    EXPECT_LT(err(d.row(0), ref[i]), kRefTol) << "decode " << i;
  }
  t.release(f.model->kv_pool());
}

// A sibling shares the weights (no copy) and has a pool of its own: the two step different
// sequences on two threads at once, each matching the naive reference; the original's KV is
// untouched by the sibling's steps.
TEST(Model, SiblingStepsBesideTheOriginalOnAnotherThread) {
  Fixture f(Variant::kQwen2Bias, 16);
  auto sib = f.model->sibling(size_t{4} << 20, 1);
  ASSERT_TRUE(sib.ok()) << sib.status().to_string();
  Model& s = **sib;
  EXPECT_EQ(s.fingerprint(), f.model->fingerprint());
  EXPECT_NE(&s.kv_pool(), &f.model->kv_pool());
  EXPECT_EQ(s.kv_pool().layout().block_bytes(), f.model->kv_pool().layout().block_bytes());
  auto a_toks = random_tokens(301, 11);
  auto b_toks = random_tokens(257, 12);
  std::vector<std::vector<double>> ra, rb;
  Reference(f.cfg, f.w).run(a_toks, &ra);
  Reference(f.cfg, f.w).run(b_toks, &rb);
  double ea = 0, eb = 0;
  auto run = [](Model& m, const std::vector<int32_t>& toks, const std::vector<std::vector<double>>& ref, double* e) {
    BlockTable t;
    // Chunks of 37, then decodes: many steps, so the threads' steps interleave.
    int c = 0;
    for (; c + 37 <= static_cast<int>(toks.size()) - 4; c += 37) {
      StepOutput o = one_step(m, t, std::span(toks).subspan(c, 37), SeqStep::Logits::kLast);
      *e = std::max(*e, err(o.row(0), ref[c + 36]));
    }
    for (; c < static_cast<int>(toks.size()); ++c) {
      StepOutput o = one_step(m, t, std::span(toks).subspan(c, 1), SeqStep::Logits::kLast);
      *e = std::max(*e, err(o.row(0), ref[c]));
    }
    t.release(m.kv_pool());
  };
  std::thread other([&] { run(s, b_toks, rb, &eb); });
  run(*f.model, a_toks, ra, &ea);
  other.join();
  EXPECT_LT(ea, kRefTol);
  EXPECT_LT(eb, kRefTol);
  EXPECT_EQ(s.kv_pool().free_blocks(), s.kv_pool().num_blocks());
  EXPECT_EQ(f.model->kv_pool().free_blocks(), f.model->kv_pool().num_blocks());
  // A pool smaller than one block is refused, naming the size.
  auto tiny = f.model->sibling(8, 1);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("smaller than one KV block"), std::string::npos);
}

TEST(Model, LogitsModesAndRowBegin) {
  Fixture f(Variant::kLlama);
  auto a = random_tokens(7, 1), b = random_tokens(5, 2), c = random_tokens(3, 3);
  BlockTable ta, tb, tc;
  std::vector<SeqStep> batch{{&ta, a, SeqStep::Logits::kAll}, {&tb, b, SeqStep::Logits::kNone},
                             {&tc, c, SeqStep::Logits::kLast}};
  StepOutput out;
  ASSERT_TRUE(f.model->forward(batch, &out).ok());
  EXPECT_EQ(out.logits.size(), 8u * 97);
  EXPECT_EQ(out.row_begin, (std::vector<int>{0, 7, 7}));
  EXPECT_EQ(tb.num_tokens(), 5);  // KV written even without logits
  for (auto* t : {&ta, &tb, &tc}) t->release(f.model->kv_pool());
}

// kGreedy returns, per sequence, the greedy pick of the row kLast would have returned (same token,
// same log-probability: greedy_pick of that row) and no logits row; mixed in one step with kAll,
// kNone and kLast, which keep their rows and row_begin.
TEST(Model, GreedyPicksEqualThePickOfTheLastRow) {
  Fixture f(Variant::kLlama);
  const std::vector<int32_t> a = random_tokens(9, 11), b = random_tokens(4, 12), c = random_tokens(6, 13),
                             d = random_tokens(1, 14);
  BlockTable ta, tb, tc, td, ra, rb, rc, rd;
  std::vector<SeqStep> batch{{&ta, a, SeqStep::Logits::kGreedy}, {&tb, b, SeqStep::Logits::kAll},
                             {&tc, c, SeqStep::Logits::kGreedy}, {&td, d, SeqStep::Logits::kNone}};
  StepOutput out;
  ASSERT_TRUE(f.model->forward(batch, &out).ok());
  EXPECT_EQ(out.logits.size(), 4u * 97);  // only b's rows
  EXPECT_EQ(out.row_begin, (std::vector<int>{0, 0, 4, 4}));
  ASSERT_EQ(out.picks.size(), 4u);
  EXPECT_LT(out.picks[1].token, 0);
  EXPECT_LT(out.picks[3].token, 0);
  for (auto [t, toks, i] : {std::tuple{&ra, &a, 0}, std::tuple{&rc, &c, 2}}) {
    const StepOutput last = f.step(*t, *toks, SeqStep::Logits::kLast);
    const SampleResult want = greedy_pick(last.row(0));
    EXPECT_EQ(out.picks[i].token, want.token) << "seq " << i;
    EXPECT_NEAR(out.picks[i].logprob, want.logprob, 1e-5) << "seq " << i;
    // Against the definition, in double: the argmax and its log-softmax.
    const auto row = last.row(0);
    const int arg = static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
    double sum = 0.0;
    for (float x : row) sum += std::exp(static_cast<double>(x) - row[arg]);
    EXPECT_EQ(want.token, arg);
    EXPECT_NEAR(want.logprob, -std::log(sum), 1e-5);
  }
  for (auto* t : {&ta, &tb, &tc, &td, &ra, &rb, &rc, &rd}) t->release(f.model->kv_pool());
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

// One batched step mixing fresh prefills, a prefill chunk onto cached KV and decodes gives the same
// logits as running each sequence alone.
TEST(Model, BatchedStepEqualsOneAtATime) {
  Fixture f(Variant::kQwen2Bias, 3);
  const std::vector<int> cached = {0, 33, 20, 7, 129};
  const std::vector<int> fresh = {7, 1, 5, 1, 1};
  std::vector<std::vector<int32_t>> toks;
  std::vector<BlockTable> batched(cached.size()), alone(cached.size());
  for (size_t i = 0; i < cached.size(); ++i) {
    toks.push_back(random_tokens(cached[i] + fresh[i], 100 + static_cast<uint32_t>(i)));
    if (cached[i] > 0) {
      f.step(batched[i], std::span(toks[i]).subspan(0, cached[i]), SeqStep::Logits::kNone);
      f.step(alone[i], std::span(toks[i]).subspan(0, cached[i]), SeqStep::Logits::kNone);
    }
  }
  std::vector<SeqStep> batch;
  for (size_t i = 0; i < cached.size(); ++i) {
    batch.push_back({&batched[i], std::span(toks[i]).subspan(cached[i], fresh[i]), SeqStep::Logits::kAll});
  }
  StepOutput out;
  ASSERT_TRUE(f.model->forward(batch, &out).ok());
  for (size_t i = 0; i < cached.size(); ++i) {
    StepOutput one = f.step(alone[i], std::span(toks[i]).subspan(cached[i], fresh[i]), SeqStep::Logits::kAll);
    for (int r = 0; r < fresh[i]; ++r) {
      EXPECT_LT(err(out.row(out.row_begin[i] + r), one.row(r)), kSelfTol) << "seq " << i << " row " << r;
    }
    EXPECT_EQ(batched[i].num_tokens(), cached[i] + fresh[i]);
  }
  for (auto& t : batched) t.release(f.model->kv_pool());
  for (auto& t : alone) t.release(f.model->kv_pool());
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

// A forked prefix continued two ways (copy-on-write of the shared partial block) equals running
// each continuation from scratch, and leaves the parent intact.
class SharedPrefix : public ::testing::TestWithParam<int> {};

TEST_P(SharedPrefix, ForkEqualsIndependent) {
  Fixture f(Variant::kLlama, GetParam());
  auto prefix = random_tokens(25, 11), cont_a = random_tokens(9, 12), cont_b = random_tokens(9, 13);
  BlockTable parent;
  f.step(parent, prefix, SeqStep::Logits::kNone);
  const size_t used = f.model->kv_pool().used_blocks();
  BlockTable child_a = parent.fork(f.model->kv_pool());
  BlockTable child_b = parent.fork_prefix(f.model->kv_pool(), 20);  // partial prefix, unaligned
  EXPECT_EQ(f.model->kv_pool().used_blocks(), used);
  StepOutput ga = f.step(child_a, cont_a, SeqStep::Logits::kAll);
  StepOutput gb = f.step(child_b, cont_b, SeqStep::Logits::kAll);
  // Independent runs.
  std::vector<int32_t> full_a(prefix), full_b(prefix.begin(), prefix.begin() + 20);
  full_a.insert(full_a.end(), cont_a.begin(), cont_a.end());
  full_b.insert(full_b.end(), cont_b.begin(), cont_b.end());
  BlockTable ia, ib;
  StepOutput ra = f.step(ia, full_a, SeqStep::Logits::kAll);
  StepOutput rb = f.step(ib, full_b, SeqStep::Logits::kAll);
  for (int r = 0; r < 9; ++r) {
    EXPECT_LT(err(ga.row(r), ra.row(25 + r)), kSelfTol) << "a row " << r;
    EXPECT_LT(err(gb.row(r), rb.row(20 + r)), kSelfTol) << "b row " << r;
  }
  // The parent still decodes as if nothing happened.
  auto next = random_tokens(1, 14);
  StepOutput pd = f.step(parent, next, SeqStep::Logits::kLast);
  std::vector<int32_t> full_p(prefix);
  full_p.push_back(next[0]);
  std::vector<std::vector<double>> ref;
  Reference(f.cfg, f.w).run(full_p, &ref);
  EXPECT_LT(err(pd.row(0), ref.back()), kRefTol);
  for (auto* t : {&parent, &child_a, &child_b, &ia, &ib}) t->release(f.model->kv_pool());
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, SharedPrefix, ::testing::Values(1, 3, 16));

// Paged with block sizes 1, 3, 16, 64 == one contiguous block.
TEST(Model, BlockSizesEqualContiguous) {
  auto toks = random_tokens(70, 21);
  auto run = [&](int bs) {
    Fixture f(Variant::kLlama3Rope, bs);
    BlockTable t;
    std::vector<float> rows;
    StepOutput a = f.step(t, std::span(toks).subspan(0, 67), SeqStep::Logits::kAll);
    rows = a.logits;
    for (int i = 67; i < 70; ++i) {
      StepOutput d = f.step(t, std::span(toks).subspan(i, 1), SeqStep::Logits::kLast);
      rows.insert(rows.end(), d.logits.begin(), d.logits.end());
    }
    return rows;
  };
  const auto contiguous = run(128);
  for (int bs : {1, 3, 16, 64}) {
    const auto paged = run(bs);
    ASSERT_EQ(paged.size(), contiguous.size());
    EXPECT_LT(err(paged, contiguous), kSelfTol) << "block size " << bs;
  }
}

TEST(Model, PoolExhaustionChangesNothing) {
  ModelConfig cfg = tiny_config(Variant::kLlama);
  // 2 layers · 2 kv heads · 16 dims · 4 tokens · 2 (K, V) · 4 bytes = 2 KiB per block; 6 blocks.
  Fixture f(Variant::kLlama, 4, 6 * 2048);
  ASSERT_EQ(f.model->kv_pool().num_blocks(), 6u);
  auto a = random_tokens(10, 31), b = random_tokens(9, 32);
  BlockTable ta, tb;
  f.step(ta, a, SeqStep::Logits::kNone);  // 3 blocks
  BlockTable tf = ta.fork(f.model->kv_pool());
  const auto blocks_a = ta.blocks();
  const size_t free_before = f.model->kv_pool().free_blocks();
  // tb needs 3 blocks, tf needs 1 (copy of the shared partial block): 4 > 3 free.
  std::vector<SeqStep> batch{{&tf, std::span(b).subspan(0, 1), SeqStep::Logits::kLast},
                             {&tb, b, SeqStep::Logits::kLast}};
  StepOutput out;
  Status st = f.model->forward(batch, &out);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("KV pool full"), std::string::npos);
  EXPECT_EQ(f.model->kv_pool().free_blocks(), free_before);
  EXPECT_EQ(tb.num_tokens(), 0);
  EXPECT_TRUE(tb.blocks().empty());
  EXPECT_EQ(tf.num_tokens(), 10);
  EXPECT_EQ(tf.blocks(), blocks_a);
  // After freeing the parent the same step fits (tf's last block is no longer shared).
  ta.release(f.model->kv_pool());
  ASSERT_TRUE(f.model->forward(batch, &out).ok());
  EXPECT_EQ(tf.num_tokens(), 11);
  EXPECT_EQ(tb.num_tokens(), 9);
  tf.release(f.model->kv_pool());
  tb.release(f.model->kv_pool());
}

TEST(Model, EmbedIsMeanOfFinalNormedHidden) {
  Fixture f(Variant::kTied);
  auto toks = random_tokens(33, 41);
  std::vector<float> e;
  ASSERT_TRUE(f.model->embed(toks, &e).ok());
  std::vector<std::vector<double>> logits, hidden;
  Reference(f.cfg, f.w).run(toks, &logits, &hidden);
  std::vector<double> mean(f.cfg.hidden_size, 0.0);
  for (const auto& h : hidden)
    for (int i = 0; i < f.cfg.hidden_size; ++i) mean[i] += h[i] / hidden.size();
  ASSERT_EQ(e.size(), mean.size());
  EXPECT_LT(err(e, mean), kRefTol);
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);  // scratch KV released
}

TEST(Model, EmbedFirstAndLastTokenAreThoseRows) {
  Fixture f(Variant::kTied);
  auto toks = random_tokens(29, 43);
  std::vector<std::vector<double>> logits, hidden;
  Reference(f.cfg, f.w).run(toks, &logits, &hidden);
  std::vector<float> first, last;
  ASSERT_TRUE(f.model->embed(toks, &first, SentencePooling::kCls).ok());
  ASSERT_TRUE(f.model->embed(toks, &last, SentencePooling::kLastToken).ok());
  EXPECT_LT(err(first, hidden.front()), kRefTol);
  EXPECT_LT(err(last, hidden.back()), kRefTol);
  EXPECT_GT(err(first, hidden.back()), 100 * kRefTol);  // the rows differ: the checks above can fail
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

TEST(Model, FingerprintDependsOnWeightsAndShape) {
  Fixture a(Variant::kLlama, 16, 8u << 20, 1), b(Variant::kLlama, 16, 8u << 20, 1), c(Variant::kLlama, 16, 8u << 20, 2);
  Fixture d(Variant::kLlama3Rope, 16, 8u << 20, 1);
  EXPECT_EQ(a.model->fingerprint(), b.model->fingerprint());
  EXPECT_NE(a.model->fingerprint(), c.model->fingerprint());
  EXPECT_NE(a.model->fingerprint(), d.model->fingerprint());
  EXPECT_EQ(a.model->device(), "cpu");
}

// The on-disk path (config.json + model.safetensors, written by the engine's own writers) gives the
// same model as building from memory.
TEST(Model, LoadFromDirectoryEqualsCreate) {
  for (Variant v : {Variant::kQwen2Bias, Variant::kBf16}) {
    Fixture mem(v);
    const std::string dir = ::testing::TempDir() + "/ragd_model_load_" + std::to_string(static_cast<int>(v));
    std::filesystem::create_directories(dir);
    {
      std::ofstream f(dir + "/config.json");
      f << mem.cfg.to_json();
    }
    ASSERT_TRUE(write_safetensors(dir + "/model.safetensors", mem.w.tensors).ok());
    ModelOptions o;
    o.kv_pool_bytes = 8u << 20;
    auto r = Model::load(dir, o);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto& disk = *r.value();
    EXPECT_EQ(disk.config().tie_word_embeddings, mem.cfg.tie_word_embeddings);
    auto again = Model::load(dir, o);  // fingerprint is a content hash: stable across loads
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(disk.fingerprint(), again.value()->fingerprint());
    auto toks = random_tokens(33, 51);
    BlockTable ta, tb;
    SeqStep sa{&ta, toks, SeqStep::Logits::kAll}, sb{&tb, toks, SeqStep::Logits::kAll};
    StepOutput oa, ob;
    ASSERT_TRUE(mem.model->forward({&sa, 1}, &oa).ok());
    ASSERT_TRUE(disk.forward({&sb, 1}, &ob).ok());
    EXPECT_EQ(oa.logits, ob.logits);
    ta.release(mem.model->kv_pool());
    tb.release(disk.kv_pool());
    std::filesystem::remove_all(dir);
  }
}

TEST(ModelErrors, LoadWithoutConfigNamesTheFile) {
  const std::string dir = ::testing::TempDir() + "/ragd_model_noconfig";
  std::filesystem::create_directories(dir);
  auto r = Model::load(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("config.json"), std::string::npos) << r.status().message();
  std::filesystem::remove_all(dir);
}

// Keys written at positions 0..n-1 and re-rotated by delta equal the keys the model writes when the
// same tokens' K is computed at positions delta..delta+n-1 — checked through the model's own KV:
// layer-0 K depends only on the token and its position, so a sequence of `delta` filler tokens
// followed by the same tokens holds the shifted keys.
TEST(Model, RerotateKeysMatchesKeysComputedAtShiftedPositions) {
  Fixture f(Variant::kLlama3Rope, 3);
  const int n = 7, delta = 33;
  auto toks = random_tokens(n, 61), filler = random_tokens(delta, 62);
  BlockTable a, b;
  f.step(a, toks, SeqStep::Logits::kNone);
  std::vector<int32_t> shifted(filler);
  shifted.insert(shifted.end(), toks.begin(), toks.end());
  f.step(b, shifted, SeqStep::Logits::kNone);
  const size_t tf = static_cast<size_t>(f.cfg.kv_dim());
  std::vector<float> ka(n * tf), va(n * tf), kb(n * tf), vb(n * tf);
  a.read(f.model->kv_pool(), 0, 0, n, ka.data(), va.data());
  b.read(f.model->kv_pool(), 0, delta, n, kb.data(), vb.data());
  ASSERT_TRUE(f.model->rerotate_keys(ka.data(), n, delta).ok());
  EXPECT_LT(err(ka, kb), 1e-5);
  EXPECT_LT(err(va, vb), 1e-6);  // V carries no position (differs only by GEMM blocking)
  a.release(f.model->kv_pool());
  b.release(f.model->kv_pool());
}

// append_shifted stores what rerotate_keys + BlockTable::append store, bit for bit, for every KV
// dtype (the rotation happens in f32 before the pool's conversion); its inputs are not changed; a
// pool without room refuses it and leaves the table as it was.
TEST(Model, AppendShiftedEqualsRerotateThenAppend) {
  for (const kernels::KvDtype dt : {kernels::KvDtype::kF32, kernels::KvDtype::kBF16, kernels::KvDtype::kInt8}) {
    Fixture f(Variant::kLlama3Rope, 5, 8u << 20, 1, WeightFormat::kAuto, dt);
    KvPool& pool = f.model->kv_pool();
    const int L = f.cfg.num_hidden_layers, n = 23, head = 9, delta = 37;
    const size_t tf = static_cast<size_t>(f.cfg.kv_dim()), per = static_cast<size_t>(L) * n * tf;
    std::mt19937 rng(71);
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    std::vector<float> k(per), v(per), head_kv(static_cast<size_t>(L) * head * tf);
    for (float& x : k) x = u(rng);
    for (float& x : v) x = u(rng);
    for (float& x : head_kv) x = u(rng);
    const std::vector<float> k0 = k, v0 = v;
    BlockTable a, b;
    ASSERT_TRUE(a.append(pool, head, head_kv.data(), head_kv.data()));
    ASSERT_TRUE(b.append(pool, head, head_kv.data(), head_kv.data()));
    ASSERT_TRUE(f.model->append_shifted(a, n, k.data(), v.data(), delta).ok());
    EXPECT_EQ(k, k0);
    EXPECT_EQ(v, v0);
    std::vector<float> kr = k;
    ASSERT_TRUE(f.model->rerotate_keys(kr.data(), static_cast<size_t>(L) * n, delta).ok());
    ASSERT_TRUE(b.append(pool, n, kr.data(), v.data()));
    ASSERT_EQ(a.num_tokens(), head + n);
    for (int l = 0; l < L; ++l) {
      std::vector<float> ka(n * tf), va(n * tf), kb(n * tf), vb(n * tf);
      a.read(pool, l, head, n, ka.data(), va.data());
      b.read(pool, l, head, n, kb.data(), vb.data());
      EXPECT_EQ(ka, kb) << "layer " << l << " dtype " << static_cast<int>(dt);
      EXPECT_EQ(va, vb) << "layer " << l << " dtype " << static_cast<int>(dt);
    }
    // No room: refused, the table unchanged.
    const int before = a.num_tokens();
    const size_t too_many = pool.num_blocks() * static_cast<size_t>(pool.layout().block_size) + 1;
    std::vector<float> big(static_cast<size_t>(L) * too_many * tf, 0.5f);
    const Status st = f.model->append_shifted(a, static_cast<int>(too_many), big.data(), big.data(), delta);
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.to_string();
    EXPECT_EQ(a.num_tokens(), before);
    a.release(pool);
    b.release(pool);
  }
}

// ---- bad input: one test per case, each checking that the message names the problem -----------

Result<std::unique_ptr<Model>> create_with(const ModelConfig& cfg, TinyWeights w, const ModelOptions& o = {}) {
  return Model::create(cfg, WeightStore::from_tensors(std::move(w.tensors)), o);
}

TEST(ModelErrors, MissingTensorNamesItAndItsShape) {
  ModelConfig cfg = tiny_config(Variant::kLlama);
  TinyWeights w = tiny_weights(cfg, 1, false);
  w.tensors.erase("model.layers.1.mlp.up_proj.weight");
  auto r = create_with(cfg, std::move(w));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("'model.layers.1.mlp.up_proj.weight'"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("[96, 64]"), std::string::npos) << r.status().message();
}

TEST(ModelErrors, WrongShapeNamesExpectedAndActual) {
  ModelConfig cfg = tiny_config(Variant::kLlama);
  TinyWeights w = tiny_weights(cfg, 1, false);
  auto& t = w.tensors["model.layers.0.self_attn.k_proj.weight"];
  t.shape = {16, 128};  // same byte count, wrong shape
  auto r = create_with(cfg, std::move(w));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  const std::string& m = r.status().message();
  EXPECT_NE(m.find("'model.layers.0.self_attn.k_proj.weight'"), std::string::npos) << m;
  EXPECT_NE(m.find("[16, 128]"), std::string::npos) << m;
  EXPECT_NE(m.find("[32, 64]"), std::string::npos) << m;
}

TEST(ModelErrors, MissingBiasForQwen2) {
  ModelConfig cfg = tiny_config(Variant::kQwen2Bias);
  TinyWeights w = tiny_weights(cfg, 1, false);
  w.tensors.erase("model.layers.0.self_attn.v_proj.bias");
  auto r = create_with(cfg, std::move(w));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("v_proj.bias"), std::string::npos) << r.status().message();
}

TEST(ModelErrors, UntiedModelNeedsLmHead) {
  ModelConfig cfg = tiny_config(Variant::kTied);
  TinyWeights w = tiny_weights(cfg, 1, false);
  cfg.tie_word_embeddings = false;
  auto r = create_with(cfg, std::move(w));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("lm_head.weight"), std::string::npos) << r.status().message();
}

// Without nvcc the build has no CUDA backend: Unimplemented naming the device. With it, a machine
// without a GPU gets FailedPrecondition with the runtime's reason (tests/engine/cuda_backend_test.cpp
// covers machines with one).
TEST(ModelErrors, CudaDeviceWithoutAGpu) {
  ModelConfig cfg = tiny_config(Variant::kLlama);
  cfg.head_dim = 32;  // a head size the CUDA kernels are built for
  cfg.hidden_size = 128;
  ModelOptions o;
  o.device = "cuda:0";
  auto r = create_with(cfg, tiny_weights(cfg, 1, false), o);
#if RAGD_TEST_CUDA_BUILD
  if (r.ok()) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition) << r.status().to_string();
  EXPECT_NE(r.status().message().find("no usable CUDA device"), std::string::npos) << r.status().message();
#else
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("cuda:0"), std::string::npos) << r.status().message();
#endif
}

#if RAGD_TEST_CUDA_BUILD
// The CUDA backend is a module loaded on the first GPU request (backend.h): a process that runs on
// the CPU never maps cuBLAS, and one that asks for a GPU maps the module. In a child process (a
// death test re-runs the binary), so that no earlier test has loaded it.
bool mapped(const std::string& needle) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(needle) != std::string::npos) return true;
  return false;
}

TEST(ModelCudaModule, LoadedOnlyWhenAGpuIsAsked) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ModelConfig cfg = tiny_config(Variant::kLlama);
        cfg.head_dim = 32;
        cfg.hidden_size = 128;
        auto cpu = create_with(cfg, tiny_weights(cfg, 1, false));
        if (!cpu.ok()) _exit(10);
        if (mapped("libcublas") || mapped("libragd_cuda")) _exit(11);
        ModelOptions o;
        o.device = "cuda:0";
        auto gpu = create_with(cfg, tiny_weights(cfg, 1, false), o);
        if (!gpu.ok() && gpu.status().message().find("could not be loaded") != std::string::npos) _exit(12);
        _exit(mapped("libragd_cuda.so") && mapped("libcublas") ? 0 : 13);
      },
      ::testing::ExitedWithCode(0), "");
}

// A module that is not where it is looked for: FailedPrecondition naming each place tried.
TEST(ModelCudaModule, MissingModuleIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("RAGD_CUDA_MODULE", "/nonexistent/libragd_cuda.so", 1);
        ModelConfig cfg = tiny_config(Variant::kLlama);
        cfg.head_dim = 32;
        cfg.hidden_size = 128;
        ModelOptions o;
        o.device = "cuda:0";
        auto r = create_with(cfg, tiny_weights(cfg, 1, false), o);
        const bool named = !r.ok() && r.status().code() == StatusCode::kFailedPrecondition &&
                           r.status().message().find("/nonexistent/libragd_cuda.so") != std::string::npos;
        _exit(named ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}
#endif

TEST(ModelErrors, UnknownDevice) {
  ModelConfig cfg = tiny_config(Variant::kLlama);
  ModelOptions o;
  o.device = "tpu";
  auto r = create_with(cfg, tiny_weights(cfg, 1, false), o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'tpu'"), std::string::npos) << r.status().message();
}

TEST(ModelErrors, PoolSmallerThanOneBlock) {
  ModelConfig cfg = tiny_config(Variant::kLlama);
  ModelOptions o;
  o.kv_pool_bytes = 100;
  auto r = create_with(cfg, tiny_weights(cfg, 1, false), o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kv_pool_bytes"), std::string::npos) << r.status().message();
}

TEST(ModelErrors, TokenOutsideVocabulary) {
  Fixture f(Variant::kLlama);
  std::vector<int32_t> toks{1, 2, 97};
  BlockTable t;
  SeqStep s{&t, toks, SeqStep::Logits::kLast};
  StepOutput out;
  Status st = f.model->forward({&s, 1}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("id 97"), std::string::npos) << st.message();
  EXPECT_EQ(t.num_tokens(), 0);
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

TEST(ModelErrors, SameTableTwiceInOneStep) {
  Fixture f(Variant::kLlama);
  std::vector<int32_t> toks{1, 2};
  BlockTable t;
  std::vector<SeqStep> batch{{&t, toks, SeqStep::Logits::kLast}, {&t, toks, SeqStep::Logits::kLast}};
  StepOutput out;
  Status st = f.model->forward(batch, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("batch[1]"), std::string::npos) << st.message();
}

TEST(ModelErrors, EmptySequence) {
  Fixture f(Variant::kLlama);
  BlockTable t;
  SeqStep s{&t, {}, SeqStep::Logits::kLast};
  StepOutput out;
  Status st = f.model->forward({&s, 1}, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("no tokens"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace ragd::engine
