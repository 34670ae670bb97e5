// Executor end to end on a real (random-weight) tiny Llama model with a trained BPE tokenizer, a
// real corpus (RocksDB + FAISS) and the real kvstore, all in temp directories.
//
// The central property: greedy outputs with knowledge_tree and prefix reuse are the same tokens as
// with no reuse, with log-probabilities within float tolerance, whether the reused KV comes from
// the engine pool, from DRAM, or from SSD after the runtime is reopened on the same data dir.
#include <atomic>
#include <limits>
#include <memory>

#include "executor_fixture.h"

#include "context_doc.h"
#include "ragd/pipelines/pipeline_spec.h"

namespace ragd::pipelines {
namespace {

// Each shares words with two documents (the runtime's default retrieval is lexical with the
// hashing embedder), so the pipelines' top 2 are two documents: volcano + river, chess + castle.
const char* kQueries[] = {"volcano magma eruption flood", "chess knight gambit", "volcano magma eruption flood",
                          "chess knight gambit"};

TEST_F(ExecutorTest, ReuseModesGiveTheSameGreedyOutputsAsNoReuse) {
  const std::string data = tmpdir("modes");
  Runtime rt = open(options(data), true);
  int kt_reused = 0, prefix_reused = 0;
  for (const char* q : kQueries) {
    RunOutput none = run(*rt.executor, "none", q);
    RunOutput prefix = run(*rt.executor, "prefix", q);
    RunOutput kt = run(*rt.executor, "knowledge_tree", q);
    ASSERT_EQ(none.sources.size(), 2u);
    EXPECT_EQ(none.tokens.size(), 7u);
    EXPECT_EQ(none.finish, "length");
    EXPECT_EQ(none.usage.reused[kvstore::Tier::kHbm], 0);
    EXPECT_EQ(none.usage.recomputed_tokens, none.usage.prompt_tokens);
    expect_same(none, prefix, std::string("prefix: ") + q);
    expect_same(none, kt, std::string("knowledge_tree: ") + q);
    EXPECT_EQ(kt.usage.prompt_tokens, none.usage.prompt_tokens);
    EXPECT_EQ(kt.usage.reused[kvstore::Tier::kHbm] + kt.usage.reused[kvstore::Tier::kDram] + kt.usage.reused[kvstore::Tier::kSsd] + kt.usage.recomputed_tokens,
              kt.usage.prompt_tokens);
    kt_reused += kt.usage.reused[kvstore::Tier::kHbm];
    prefix_reused += prefix.usage.reused[kvstore::Tier::kHbm];
  }
  // Repeated queries hit: the whole document path is reused, only the question is prefilled.
  EXPECT_GT(kt_reused, 0);
  EXPECT_GT(prefix_reused, 0);
  close(rt);
  fs::remove_all(data);
}

TEST_F(ExecutorTest, SharedDocumentsAreReusedAcrossDifferentQuestions) {
  const std::string data = tmpdir("shared");
  Runtime rt = open(options(data), true);
  RunOutput a = run(*rt.executor, "knowledge_tree", "volcano magma eruption");
  RunOutput b = run(*rt.executor, "knowledge_tree", "volcano magma eruption ash?");
  RunOutput b_none = run(*rt.executor, "none", "volcano magma eruption ash?");
  expect_same(b_none, b, "different question, same documents");
  // Same retrieved set (stable order) -> every document node is a hit; only the question differs.
  if (a.sources.size() == b.sources.size()) {
    EXPECT_GT(b.usage.reused[kvstore::Tier::kHbm], b.usage.prompt_tokens / 2);
  }
  close(rt);
  fs::remove_all(data);
}

TEST_F(ExecutorTest, ReuseFromDramAndFromSsdAfterRestart) {
  const std::string data = tmpdir("tiers");
  RunOutput ref;
  {
    // HBM cache off: reuse can only come from the kvstore's DRAM tier.
    RuntimeOptions o = options(data);
    o.hbm_cache = false;
    Runtime rt = open(o, true);
    ref = run(*rt.executor, "none", "volcano magma eruption");
    RunOutput first = run(*rt.executor, "knowledge_tree", "volcano magma eruption");
    // The DRAM copies are made off the scheduler thread, after the first token.
    wait_until([&] { return rt.executor->stats().tiers[1].entries >= first.sources.size() + 1; });
    RunOutput second = run(*rt.executor, "knowledge_tree", "volcano magma eruption");
    expect_same(ref, first, "first");
    expect_same(ref, second, "from DRAM");
    EXPECT_EQ(second.usage.reused[kvstore::Tier::kHbm], 0);
    EXPECT_GT(second.usage.reused[kvstore::Tier::kDram], 0);
    const ExecutorStats st = rt.executor->stats();
    EXPECT_TRUE(st.tiers[1].enabled);
    EXPECT_GT(st.tiers[1].entries, 0u);
    EXPECT_GT(st.tiers[1].hits, 0u);
    EXPECT_EQ(st.tiers[0].entries, 0u);  // pool share 0: nothing cached in the pool
    EXPECT_NE(rt.executor->stats_json().find("\"tiers\""), std::string::npos);
    rt.stop();
  }
  const std::string data2 = tmpdir("tiers_ssd");
  {
    // No DRAM tier: documents go to SSD (RocksDB under data_dir/kvcache).
    RuntimeOptions o = options(data2);
    o.hbm_cache = false;
    o.kv.dram_bytes = 0;
    Runtime rt = open(o, true);
    RunOutput first = run(*rt.executor, "knowledge_tree", "volcano magma eruption");
    expect_same(ref, first, "ssd first");
    rt.stop();
  }
  {
    RuntimeOptions o = options(data2);
    o.hbm_cache = false;
    o.kv.dram_bytes = 0;
    Runtime rt = open(o, false);  // same data dir: corpus and SSD tier come back
    RunOutput again = run(*rt.executor, "knowledge_tree", "volcano magma eruption");
    expect_same(ref, again, "from SSD after restart");
    EXPECT_GT(again.usage.reused[kvstore::Tier::kSsd], 0);
    EXPECT_EQ(again.usage.reused[kvstore::Tier::kHbm], 0);
    rt.stop();
  }
  fs::remove_all(data);
  fs::remove_all(data2);
}

// A document path evicted from the engine pool (by PGDSF, under pool pressure from another run)
// comes back from DRAM, or from SSD when there is no DRAM tier, with the same outputs.
TEST_F(ExecutorTest, PoolEvictedDocumentsComeBackFromDramAndSsdIdentically) {
  const std::string data = tmpdir("evict");
  const char* qa = "volcano magma eruption";
  const char* qb = "chess knight gambit";
  RunOutput ref_a, ref_b;
  {
    Runtime rt = open(options(data), true);
    ref_a = run(*rt.executor, "none", qa);
    ref_b = run(*rt.executor, "none", qb);
    close(rt);
  }
  const int prompt = std::max(ref_a.usage.prompt_tokens, ref_b.usage.prompt_tokens);
  for (bool dram : {true, false}) {
    SCOPED_TRACE(dram ? "dram" : "ssd");
    fs::remove_all(fs::path(data) / "kvcache");
    RuntimeOptions o = options(data);
    // One run fits (prompt + 7 generated, + 2 spare blocks), not a second one beside the first
    // run's cached documents: 16-token blocks of 2 layers x K,V x 2 heads x 16 dims x 4 bytes.
    o.model.kv_pool_bytes = size_t{16} * 512 * static_cast<size_t>((prompt + 7 + 15) / 16 + 2);
    if (!dram) o.kv.dram_bytes = 0;
    Runtime rt = open(o, false);
    RunOutput a1 = run(*rt.executor, "knowledge_tree", qa);
    RunOutput b1 = run(*rt.executor, "knowledge_tree", qb);
    RunOutput a2 = run(*rt.executor, "knowledge_tree", qa);
    expect_same(ref_a, a1, "a first");
    expect_same(ref_b, b1, "b first");
    expect_same(ref_a, a2, "a after its documents left the pool");
    EXPECT_GT(rt.executor->stats().tiers[0].evictions, 0u);
    if (dram) {
      EXPECT_GT(a2.usage.reused[kvstore::Tier::kDram], 0);
    } else {
      EXPECT_GT(a2.usage.reused[kvstore::Tier::kSsd], 0);
      EXPECT_EQ(a2.usage.reused[kvstore::Tier::kDram], 0);
    }
    EXPECT_EQ(a2.usage.reused[kvstore::Tier::kHbm] + a2.usage.reused[kvstore::Tier::kDram] + a2.usage.reused[kvstore::Tier::kSsd] + a2.usage.recomputed_tokens,
              a2.usage.prompt_tokens);
    close(rt);
  }
  fs::remove_all(data);
}

// With the default tiers (pool, DRAM, SSD under data_dir, write-behind), a graceful stop keeps the
// document KV: a fresh runtime on the same directory reuses it from SSD, with the same outputs.
TEST_F(ExecutorTest, RestartReusesDocumentKvFromSsdWithTheDefaultConfiguration) {
  const std::string data = tmpdir("restart");
  const char* q = "glacier ice valley";
  RunOutput ref;
  {
    Runtime rt = open(options(data), true);
    ref = run(*rt.executor, "none", q);
    RunOutput first = run(*rt.executor, "knowledge_tree", q);
    expect_same(ref, first, "before restart");
    close(rt);  // graceful: write-behind queue drained, RocksDB flushed
  }
  {
    Runtime rt = open(options(data), false);
    RunOutput again = run(*rt.executor, "knowledge_tree", q);
    expect_same(ref, again, "after restart");
    EXPECT_GT(again.usage.reused[kvstore::Tier::kSsd], 0);
    EXPECT_EQ(again.usage.reused[kvstore::Tier::kHbm], 0);
    EXPECT_EQ(again.usage.reused[kvstore::Tier::kDram], 0);
    const ExecutorStats st = rt.executor->stats();
    EXPECT_GT(st.restored_segments, 0u);
    EXPECT_GT(st.reused[kvstore::Tier::kSsd], 0);
    close(rt);
  }
  fs::remove_all(data);
}

// Explicit per-request values win over the pipeline's defaults even when they equal the built-in
// defaults (temperature 0, max_tokens 256); unset ones take the pipeline's.
TEST_F(ExecutorTest, ExplicitOverridesWinOverPipelineDefaults) {
  const std::string data = tmpdir("overrides");
  Runtime rt = open(options(data), true);
  const char* q = "harbor ship sailor";
  RunOutput greedy = run(*rt.executor, "none", q);
  Collector c;
  RunRequest r;
  r.pipeline = "hot";
  r.query = q;
  r.sampling.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = 256;
  RunOutput out;
  ASSERT_TRUE(rt.executor->submit(r, c.sink(&out)).ok());
  ASSERT_TRUE(c.wait(&out));
  ASSERT_TRUE(out.error.ok()) << out.error.to_string();
  EXPECT_EQ(out.tokens.size(), 256u);
  ASSERT_GE(out.tokens.size(), greedy.tokens.size());
  EXPECT_EQ(std::vector<int32_t>(out.tokens.begin(), out.tokens.begin() + greedy.tokens.size()), greedy.tokens);
  RunRequest d;
  d.pipeline = "hot";
  d.query = q;
  d.sampling.ignore_eos = true;
  RunOutput dflt;
  ASSERT_TRUE(rt.executor->submit(d, c.sink(&dflt)).ok());
  ASSERT_TRUE(c.wait(&dflt));
  EXPECT_EQ(dflt.tokens.size(), 5u);  // the pipeline's max_tokens
  close(rt);
  fs::remove_all(data);
}

// Extractive answers through the executor (a request override on a plain completion, whose prompt
// is known here): the generated tokens are a run of the prompt's tokens; without the override the
// random model's output is not (so the check can fail).
TEST_F(ExecutorTest, ExtractiveRunsCopyARunOfThePrompt) {
  const std::string data = tmpdir("extractive");
  Runtime rt = open(options(data), false);
  auto tok = engine::Tokenizer::from_file(*root_ + "/model/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const std::string prompt = "the harbor ship sailor waits for the tide at the port of the bakery bread";
  std::vector<int32_t> ids = (*tok)->encode(prompt, true);
  auto contains = [&](std::vector<int32_t> run) {
    return std::search(ids.begin(), ids.end(), run.begin(), run.end()) != ids.end();
  };
  Collector c;
  for (const bool extractive : {false, true}) {
    RunRequest r;
    r.prompt = prompt;
    r.sampling.max_tokens = 24;
    r.sampling.extractive = extractive;
    RunOutput out;
    ASSERT_TRUE(rt.executor->submit(r, c.sink(&out)).ok());
    ASSERT_TRUE(c.wait(&out));
    ASSERT_TRUE(out.error.ok()) << out.error.to_string();
    std::vector<int32_t> answer = out.tokens;
    if (out.finish == "stop" && !answer.empty()) answer.pop_back();  // the stop id
    ASSERT_FALSE(answer.empty());
    EXPECT_EQ(contains(answer), extractive) << (extractive ? "extractive output is not a run of the prompt"
                                                           : "the unconstrained output happens to be a run");
  }
  close(rt);
  fs::remove_all(data);
}

// RunState over the real model: decode, checkpoint, decode more, restore and cut the KV back (what
// Scheduler::truncate asks of the KV host), decode again: the same tokens (sampled, so the RNG is
// restored too), and the client only ever saw committed tokens.
TEST_F(ExecutorTest, RunStateRollbackWithTheModelRegeneratesIdenticalTokens) {
  engine::ModelOptions mo;
  mo.kv_pool_bytes = 4ull << 20;
  mo.num_threads = 1;
  auto model = engine::Model::load(*root_ + "/model", mo);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto tok = engine::Tokenizer::from_file(*root_ + "/model/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  engine::SamplingParams sp;
  sp.temperature = 0.8f;
  sp.seed = 5;
  const std::vector<int32_t> prompt = (*tok)->encode("The harbor was quiet when the ship came in", true, false);
  RunState s(prompt, sp, **tok, {}, 64);
  s.set_auto_commit(false);
  engine::KvPool& pool = (*model)->kv_pool();
  engine::BlockTable table;
  auto step = [&] {  // feeds every token the KV lacks, samples the next
    engine::SeqStep st;
    st.table = &table;
    st.tokens = std::span<const int32_t>(s.tokens()).subspan(table.num_tokens());
    st.logits = engine::SeqStep::Logits::kLast;
    engine::StepOutput out;
    ASSERT_TRUE((*model)->forward(std::span<engine::SeqStep>(&st, 1), &out).ok());
    s.advance(out.row(out.row_begin[0]));
  };
  std::vector<RunEvent> seen;
  const EventSink sink = [&](const RunEvent& ev) {
    seen.push_back(ev);
    return true;
  };
  while (s.generated() < 4) step();
  s.commit();
  ASSERT_TRUE(s.release(sink));
  const RunState::Checkpoint cp = s.checkpoint();
  while (s.generated() < 10) step();
  ASSERT_TRUE(s.release(sink));
  EXPECT_EQ(seen.size(), 4u) << "tentative tokens reached the client";
  const std::vector<int32_t> first = s.tokens();
  s.restore(cp);
  table.truncate(pool, static_cast<int>(cp.tokens) - 1);
  while (s.generated() < 10) step();
  EXPECT_EQ(s.tokens(), first);
  s.commit();
  ASSERT_TRUE(s.release(sink));
  ASSERT_EQ(seen.size(), 10u);
  for (size_t i = 0; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].index, static_cast<int>(i));
    EXPECT_EQ(seen[i].token_id, first[prompt.size() + i]);
  }
  table.release(pool);
  EXPECT_EQ(pool.free_blocks(), pool.num_blocks());
}

TEST_F(ExecutorTest, ConcurrentRunsWithPreemptionMatchSequentialRuns) {
  const std::string data = tmpdir("preempt");
  // More tokens than a 16-token block holds: every run's decode takes a new block, whatever its
  // prompt's length, so runs sharing the full pool preempt one another.
  constexpr int kTokens = 20;
  std::vector<RunOutput> seq;
  {
    Runtime rt = open(options(data), true);
    for (const char* q : kQueries) seq.push_back(run(*rt.executor, "none", q, kTokens));
    rt.stop();
  }
  for (const char* mode : {"swap", "recompute"}) {
    RuntimeOptions o = options(data);
    o.model.kv_pool_bytes = 256 * 1024;  // 32 blocks of 16 tokens: one prompt fits, four at once do not
    o.scheduler.preemption = *parse_preempt_mode(mode);
    o.scheduler.max_running = 6;
    Runtime rt = open(o, false);
    std::vector<RunOutput> outs(std::size(kQueries));
    Collector c;
    for (size_t i = 0; i < std::size(kQueries); ++i) {
      RunRequest r;
      r.pipeline = "none";
      r.query = kQueries[i];
      r.sampling.max_tokens = kTokens;
      r.sampling.ignore_eos = true;
      ASSERT_TRUE(rt.executor->submit(r, c.sink(&outs[i])).ok());
    }
    for (auto& o2 : outs) ASSERT_TRUE(c.wait(&o2));
    for (size_t i = 0; i < outs.size(); ++i) {
      ASSERT_TRUE(outs[i].error.ok()) << outs[i].error.to_string();
      expect_same(seq[i], outs[i], std::string(mode) + " run " + std::to_string(i));
    }
    rt.stop();  // the scheduler publishes its final stats on exit
    const ExecutorStats stats = rt.executor->stats();
    if (std::string(mode) == "swap") {
      EXPECT_GT(stats.swaps_out, 0) << stats.to_json();
    } else {
      EXPECT_GT(stats.drops, 0) << stats.to_json();
    }
    EXPECT_EQ(stats.running, 0) << stats.to_json();
    EXPECT_EQ(stats.swap_bytes, 0u) << stats.to_json();
    rt.stop();
  }
  fs::remove_all(data);
}

// The rows of a step are sampled on all cores (each run's sampler, RNG and history are its own):
// concurrent seeded runs (temperature 0.9, top-p 0.9, and greedy ones) give the same tokens with the
// rows drawn in parallel as one after the other.
TEST_F(ExecutorTest, RowsSampledInParallelGiveTheSameTokens) {
  const std::string data = tmpdir("parallel_sample");
  std::vector<std::vector<RunOutput>> results;
  for (size_t min_values : {std::numeric_limits<size_t>::max(), size_t{0}}) {
    RuntimeOptions o = options(data);
    o.test_hooks.parallel_sample_min_values = min_values;
    o.scheduler.max_running = 8;
    Runtime rt = open(o, results.empty());
    std::vector<RunOutput> outs(2 * std::size(kQueries));
    Collector c;
    for (size_t i = 0; i < outs.size(); ++i) {
      RunRequest r;
      r.pipeline = "none";
      r.query = kQueries[i % std::size(kQueries)];
      r.sampling.max_tokens = 10;
      r.sampling.ignore_eos = true;
      if (i % 2 == 0) {  // half sampled with a seed, half greedy
        r.sampling.temperature = 0.9f;
        r.sampling.top_p = 0.9f;
        r.sampling.seed = 100 + i;
      }
      ASSERT_TRUE(rt.executor->submit(r, c.sink(&outs[i])).ok());
    }
    for (auto& out : outs) ASSERT_TRUE(c.wait(&out));
    for (const auto& out : outs) ASSERT_TRUE(out.error.ok()) << out.error.to_string();
    results.push_back(std::move(outs));
    rt.stop();
  }
  for (size_t i = 0; i < results[0].size(); ++i) {
    expect_same(results[0][i], results[1][i], "run " + std::to_string(i));
  }
  fs::remove_all(data);
}

TEST_F(ExecutorTest, CancelFreesEverything) {
  const std::string data = tmpdir("cancel");
  Runtime rt = open(options(data), true);
  RunRequest r;
  r.pipeline = "none";
  r.query = "glacier ice";
  r.sampling.max_tokens = 200;
  r.sampling.ignore_eos = true;
  RunOutput out;
  Collector c;
  ASSERT_TRUE(rt.executor->submit(r, c.sink(&out, /*cancel_after=*/3)).ok());
  ASSERT_TRUE(c.wait(&out));
  EXPECT_EQ(out.finish, "cancelled");
  EXPECT_EQ(out.tokens.size(), 3u);
  // Explicit cancel by id.
  r.id = "to-cancel";
  RunOutput out2;
  ASSERT_TRUE(rt.executor->submit(r, c.sink(&out2)).ok());
  rt.executor->cancel("to-cancel");
  ASSERT_TRUE(c.wait(&out2));
  EXPECT_EQ(out2.finish, "cancelled");
  EXPECT_LT(out2.tokens.size(), 200u);
  rt.stop();
  const ExecutorStats stats = rt.executor->stats();
  EXPECT_EQ(stats.running, 0) << stats.to_json();
  EXPECT_EQ(stats.swap_bytes, 0u) << stats.to_json();
  close(rt);
  fs::remove_all(data);
}

TEST_F(ExecutorTest, BadRequestsAreRejectedWithClearErrors) {
  const std::string data = tmpdir("bad");
  RuntimeOptions small = options(data);
  small.model.kv_pool_bytes = 256 * 1024;  // 512 tokens
  small.kv_spill_dram_bytes = 0;  // no spill: a run beyond the pool is refused (executor_sp_test: spilled)
  small.kv_spill_ssd = false;
  Runtime rt = open(small, false);
  Collector c;
  RunOutput out;
  RunRequest r;
  r.pipeline = "nope";
  r.query = "x";
  Status st = rt.executor->submit(r, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("'nope'"), std::string::npos);
  r.pipeline = "none";
  r.query = "";
  st = rt.executor->submit(r, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("query"), std::string::npos);
  r.pipeline = "";
  st = rt.executor->submit(r, c.sink(&out));
  EXPECT_NE(st.message().find("messages or prompt"), std::string::npos);
  r.prompt = "hello";
  r.sampling.top_p = 0;
  st = rt.executor->submit(r, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  r.sampling.top_p = 1;
  r.sampling.max_tokens = 100000;  // clamped to the 2048-token context, still beyond the 512-token pool
  ASSERT_TRUE(rt.executor->submit(r, c.sink(&out)).ok());
  ASSERT_TRUE(c.wait(&out));
  EXPECT_EQ(out.error.code(), StatusCode::kInvalidArgument) << "a request no load change makes servable is not a 429";
  EXPECT_NE(out.error.message().find("KV blocks"), std::string::npos) << out.error.message();
  RuntimeOptions bad = options(data);
  bad.data_dir = "";
  bad.scheduler.max_running = 0;  // the runtime refuses what the daemon's config check refuses, with its message
  auto rt2 = open_runtime(bad);
  ASSERT_FALSE(rt2.ok());
  EXPECT_NE(rt2.status().message().find("runtime.max_running: must be > 0, got 0"), std::string::npos) << rt2.status().message();
  close(rt);
  fs::remove_all(data);
}

// Queries whose top-2 sets overlap in different combinations, so that documents recur after other
// documents than the ones they were first cached after (what the approximate modes are for). Each
// names words of four topics, most of the first, then the second, one each of two more: the top 2
// and the top 4 are those documents in every retrieval mode (lexical: by the words they share).
const char* kMixQueries[] = {"volcano magma eruption, river flood, glacier, harbor",
                             "chess gambit rook, castle siege, crater, espresso",
                             "castle siege moat, chess bishop, delta, tomato",
                             "volcano ash crater, glacier frozen, bishop, bread",
                             "harbor ship anchor, volcano lava, espresso, rocket",
                             "river delta water, harbor tide, moat, violin",
                             "chess opening rook, volcano magma, anchor, parser",
                             "glacier ice arctic, river sediment, tower, tomato",
                             "harbor sailor port, river bank, gambit, coffee"};

// CacheBlend with every row recomputed and EPIC with whole documents recomputed are full prefills:
// the same greedy tokens and log-probabilities as no reuse, while documents are placed from the
// chunk cache.
TEST_F(ExecutorTest, ApproximateModesAtFullRecomputeMatchNoReuse) {
  const std::string data = tmpdir("blend_full");
  Runtime rt = open(options(data), true);
  int blended = 0, approximate = 0;
  for (const char* q : kMixQueries) {
    RunOutput none = run(*rt.executor, "none", q);
    RunOutput cb = run(*rt.executor, "cacheblend", q, 7, [](RunRequest& r) { r.recompute_ratio = 1.0; });
    RunOutput ep = run(*rt.executor, "epic", q, 7, [](RunRequest& r) { r.epic_k = 4096; });
    expect_same(none, cb, std::string("cacheblend r=1: ") + q);
    expect_same(none, ep, std::string("epic k=all: ") + q);
    for (const RunOutput* o : {&cb, &ep}) {
      EXPECT_EQ(o->usage.reuse, o == &cb ? "cacheblend" : "epic");
      if (o->usage.approximate) {
        ++approximate;
        EXPECT_GT(o->usage.blended_tokens, 0);
        EXPECT_EQ(o->usage.repaired_tokens, o->usage.blended_tokens);
        EXPECT_TRUE(o->usage.reuse_note.empty()) << o->usage.reuse_note;
      }
      blended += o->usage.blended_tokens;
      EXPECT_LE(o->usage.reused[kvstore::Tier::kHbm] + o->usage.reused[kvstore::Tier::kDram] + o->usage.reused[kvstore::Tier::kSsd], o->usage.prompt_tokens);
    }
  }
  EXPECT_GT(approximate, 0) << "no run placed chunk KV: the test would prove nothing";
  EXPECT_GT(blended, 0);
  const ExecutorStats st = rt.executor->stats();
  EXPECT_EQ(st.approximate_runs, approximate);
  close(rt);
  fs::remove_all(data);
}

// The repair riding in the run's first prefill step (with the question, first-seen documents
// computed in context) against the earlier path (chunk step, repair step, then the question): on
// documents whose chunk KV is cached, the same KV is placed and repaired, so the outputs are the
// same; the runs do blend (the check would prove nothing otherwise).
TEST_F(ExecutorTest, RepairInTheFirstPrefillStepEqualsTheRepairStepAtAdmission) {
  std::vector<RunOutput> outs[2];
  int blended[2] = {0, 0};
  for (int deferred = 0; deferred < 2; ++deferred) {
    const std::string data = tmpdir(deferred ? "blend_deferred" : "blend_admission");
    RuntimeOptions o = options(data);
    o.blend_check.enabled = false;
    o.test_hooks.blend_repair_at_admission = deferred == 0;
    Runtime rt = open(o, true);
    for (const char* q : kMixQueries) {  // chunk KV for every document (top 3: no 4-document path in the tree)
      run(*rt.executor, "cacheblend", q, 2, [](RunRequest& r) { r.retrieval_top_k = 3; });
      run(*rt.executor, "epic", q, 2, [](RunRequest& r) { r.retrieval_top_k = 3; });
    }
    for (const char* q : kMixQueries)
      for (const char* mode : {"cacheblend", "epic"}) {
        RunOutput out = run(*rt.executor, mode, q, 6);
        blended[deferred] += out.usage.blended_tokens;
        outs[deferred].push_back(std::move(out));
      }
    close(rt);
    fs::remove_all(data);
  }
  ASSERT_EQ(outs[0].size(), outs[1].size());
  for (size_t i = 0; i < outs[0].size(); ++i) {
    expect_same(outs[0][i], outs[1][i], "run " + std::to_string(i));
    EXPECT_EQ(outs[0][i].usage.blended_tokens, outs[1][i].usage.blended_tokens) << i;
    EXPECT_EQ(outs[0][i].usage.repaired_tokens, outs[1][i].usage.repaired_tokens) << i;
  }
  EXPECT_GT(blended[1], 0) << "no run placed chunk KV: the test would prove nothing";
}

// reuse "auto": the cheapest approximate mode whose self-check passes on this model, else exact;
// the choice and its measured fidelity in usage.reuse_note and the executor's stats.
TEST_F(ExecutorTest, AutoReusePicksTheCheapestModeThatPassesElseExact) {
  struct Case {
    const char* name;
    double min_agreement, max_kl;
    std::string want_mode, want_choice;
  };
  const Case cases[] = {
      {"every mode passes", 0.0, 1e9, "epic", "epic:16"},
      {"no mode can pass", 1.5, 1e9, "knowledge_tree", "exact"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string data = tmpdir(std::string("blend_auto_") + c.want_choice);
    RuntimeOptions o = options(data);
    o.blend_check.enabled = true;
    o.blend_check.min_greedy_agreement = c.min_agreement;
    o.blend_check.max_first_token_kl = c.max_kl;
    o.blend_check.auto_min_greedy_agreement = c.min_agreement;
    o.blend_check.auto_max_first_token_kl = c.max_kl;
    Runtime rt = open(o, true);
    for (const char* q : kMixQueries)  // chunk KV for every document
      run(*rt.executor, "cacheblend", q, 2, [](RunRequest& r) {
        r.retrieval_top_k = 3;
        r.reuse = ReuseMode::kAuto;
      });
    int blended = 0;
    for (const char* q : kMixQueries) {  // 4 documents: past what the warm-up left in the tree
      RunOutput out = run(*rt.executor, "cacheblend", q, 4, [](RunRequest& r) {
        r.reuse = ReuseMode::kAuto;
        r.retrieval_top_k = 4;
      });
      ASSERT_TRUE(out.error.ok()) << out.error.to_string();
      EXPECT_EQ(out.usage.reuse, c.want_mode) << q;
      EXPECT_NE(out.usage.reuse_note.find("auto: " + c.want_choice), std::string::npos) << out.usage.reuse_note;
      blended += out.usage.blended_tokens;
    }
    if (c.want_choice == "exact") EXPECT_EQ(blended, 0);
    else EXPECT_GT(blended, 0);
    const ExecutorStats st = rt.executor->stats();
    EXPECT_EQ(st.reuse_auto, c.want_choice);
    if (c.want_choice != "exact") EXPECT_GT(st.reuse_auto_agreement + st.reuse_auto_kl, 0.0) << st.to_json();
    close(rt);
    fs::remove_all(data);
  }
}

// Chunk KV written through to SSD comes back after a restart and gives the same (approximate)
// outputs as the first process, where the chunks came from DRAM (its second pass: in the first,
// documents seen for the first time are computed in context and their chunk KV after the first
// token).
TEST_F(ExecutorTest, ChunkKvFromSsdAfterRestartGivesTheSameOutputs) {
  const std::string data = tmpdir("blend_ssd");
  std::vector<RunOutput> first;
  RuntimeOptions o = options(data);
  o.blend_check.enabled = false;  // approximate whatever the random model's fidelity
  {
    Runtime rt = open(o, true);
    for (const char* q : kMixQueries) run(*rt.executor, "cacheblend", q);
    for (const char* q : kMixQueries) first.push_back(run(*rt.executor, "cacheblend", q));
    close(rt);
  }
  o.hbm_cache = false;
  o.kv.dram_bytes = 0;  // every reuse after the restart comes from SSD
  Runtime rt = open(o, false);
  int ssd = 0, approximate = 0;
  for (size_t i = 0; i < std::size(kMixQueries); ++i) {
    RunOutput again = run(*rt.executor, "cacheblend", kMixQueries[i]);
    expect_same(first[i], again, std::string("after restart: ") + kMixQueries[i]);
    EXPECT_EQ(again.usage.approximate, first[i].usage.approximate) << kMixQueries[i];
    EXPECT_EQ(again.usage.reused[kvstore::Tier::kHbm], 0);
    ssd += again.usage.reused[kvstore::Tier::kSsd];
    approximate += again.usage.approximate;
  }
  EXPECT_GT(ssd, 0);
  EXPECT_GT(approximate, 0);
  close(rt);
  fs::remove_all(data);
}

// The self-check measures fidelity on the first prompt that would place a displaced document and
// keeps the verdict: below the thresholds every run of that mode serves exact reuse (outputs equal
// to no reuse) with the reason in usage.reuse_note; above them runs are approximate.
TEST_F(ExecutorTest, ReuseSelfCheckFallsBackToExactReuseWithAReason) {
  for (bool pass : {false, true}) {
    const std::string data = tmpdir(pass ? "check_pass" : "check_fail");
    RuntimeOptions o = options(data);
    o.blend_check.min_greedy_agreement = pass ? 0.0 : 1.01;  // unreachable when failing
    o.blend_check.max_first_token_kl = 1e9;
    Runtime rt = open(o, true);
    int approximate = 0, noted = 0;
    for (const char* q : kMixQueries) {
      RunOutput none = run(*rt.executor, "none", q);
      RunOutput cb = run(*rt.executor, "cacheblend", q);
      approximate += cb.usage.approximate;
      if (cb.usage.reuse_note.find("self-check failed") != std::string::npos) {
        ++noted;
        expect_same(none, cb, std::string("exact fallback: ") + q);
      }
    }
    if (pass) {
      EXPECT_GT(approximate, 0);
      EXPECT_EQ(noted, 0);
    } else {
      EXPECT_EQ(approximate, 0);
      EXPECT_GT(noted, 0);
      EXPECT_GE(rt.executor->stats().blend_fallbacks, noted);  // plus runs before the head was cached
    }
    close(rt);
    fs::remove_all(data);
  }
}

// The first token never waits for the prompt's KV publication: with publication blocked until the
// client has the first token, the token still arrives (and the run then finishes normally).
TEST_F(ExecutorTest, FirstTokenArrivesBeforeKvPublication) {
  const std::string data = tmpdir("publish_order");
  RuntimeOptions o = options(data);
  std::mutex mu;
  std::condition_variable cv;
  bool first_token = false, published_after_token = false, publish_called = false;
  o.test_hooks.before_publish = [&](const std::string&) {
    std::unique_lock<std::mutex> lk(mu);
    publish_called = true;
    published_after_token = cv.wait_for(lk, std::chrono::seconds(20), [&] { return first_token; });
  };
  Runtime rt = open(o, true);
  RunRequest r;
  r.pipeline = "knowledge_tree";
  r.query = "volcano magma eruption";
  r.sampling.max_tokens = 3;
  r.sampling.ignore_eos = true;
  RunOutput out;
  Collector c;
  EventSink inner = c.sink(&out);
  ASSERT_TRUE(rt.executor->submit(r, [&](const RunEvent& ev) {
                    if (ev.kind == RunEvent::Kind::kToken) {
                      std::lock_guard<std::mutex> lk(mu);
                      first_token = true;
                      cv.notify_all();
                    }
                    return inner(ev);
                  }).ok());
  ASSERT_TRUE(c.wait(&out));
  ASSERT_TRUE(out.error.ok()) << out.error.to_string();
  EXPECT_TRUE(publish_called);
  EXPECT_TRUE(published_after_token) << "publication ran before the first token reached the client";
  EXPECT_EQ(out.tokens.size(), 3u);
  EXPECT_GE(out.timings.publish_ms, 0.0);
  EXPECT_NEAR(out.timings.kv_load_ms, out.timings.lookup_ms + out.timings.admit_ms, 1e-6);
  close(rt);
  fs::remove_all(data);
}

// Approximate runs at full recompute, concurrent, under pool pressure (preempted by swap or by
// recompute, re-admitted, blended again): still the sequential no-reuse outputs.
TEST_F(ExecutorTest, ConcurrentApproximateRunsUnderPreemptionMatchNoReuse) {
  const std::string data = tmpdir("blend_preempt");
  constexpr int kTokens = 12;
  std::vector<RunOutput> seq;
  {
    Runtime rt = open(options(data), true);
    for (const char* q : kMixQueries) seq.push_back(run(*rt.executor, "none", q, kTokens));
    close(rt);
  }
  for (const char* mode : {"swap", "recompute"}) {
    RuntimeOptions o = options(data);
    o.model.kv_pool_bytes = 640 * 1024;  // 80 blocks of 16 tokens: a few prompts at once, not all
    o.scheduler.preemption = *parse_preempt_mode(mode);
    o.scheduler.max_running = 9;
    o.blend_check.enabled = false;  // r = 1 passes anyway; under pressure the check may find no room
    // The first concurrent run to publish holds the scheduler for 300 ms, so that every other run's
    // search has returned and they are admitted together: without it, on a fast machine the first
    // runs could finish before the last searches returned, and nothing had to be preempted.
    auto hold = std::make_shared<std::atomic<bool>>(false);
    o.test_hooks.before_publish = [hold](const std::string&) {
      if (hold->exchange(false)) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    };
    Runtime rt = open(o, false);
    // Warm the head and the chunks first, so that the concurrent runs blend: each query with its
    // top 3 documents (their chunk KV is cached after the first token; no 4-document path enters
    // the tree, so the runs below place chunks rather than reuse whole paths).
    for (const char* q : kMixQueries)
      run(*rt.executor, "cacheblend", q, 2, [](RunRequest& r) {
        r.recompute_ratio = 1.0;
        r.retrieval_top_k = 3;
      });
    std::vector<RunOutput> outs(std::size(kMixQueries));
    Collector c;
    hold->store(true);
    for (size_t i = 0; i < std::size(kMixQueries); ++i) {
      RunRequest r;
      r.pipeline = i % 2 ? "epic" : "cacheblend";
      r.query = kMixQueries[i];
      r.sampling.max_tokens = kTokens;
      r.sampling.ignore_eos = true;
      r.recompute_ratio = 1.0;
      r.epic_k = 4096;
      ASSERT_TRUE(rt.executor->submit(r, c.sink(&outs[i])).ok());
    }
    int approximate = 0;
    for (auto& o2 : outs) ASSERT_TRUE(c.wait(&o2));
    for (size_t i = 0; i < outs.size(); ++i) {
      ASSERT_TRUE(outs[i].error.ok()) << outs[i].error.to_string();
      expect_same(seq[i], outs[i], std::string(mode) + " run " + std::to_string(i));
      approximate += outs[i].usage.approximate;
    }
    EXPECT_GT(approximate, 0) << outs[1].usage.reuse_note << " / " << outs[2].usage.reuse_note;
    rt.stop();
    const ExecutorStats stats = rt.executor->stats();
    EXPECT_GT(stats.swaps_out + stats.drops, 0) << stats.to_json();
    EXPECT_EQ(stats.running, 0) << stats.to_json();
    EXPECT_EQ(stats.swap_bytes, 0u) << stats.to_json();
    close(rt);
  }
  fs::remove_all(data);
}

TEST_F(ExecutorTest, ApproximateReuseParametersAreValidated) {
  Runtime rt = open(options(""), false);
  Collector c;
  RunOutput out;
  RunRequest r;
  r.pipeline = "cacheblend";
  r.query = "x";
  r.recompute_ratio = 1.5;
  Status st = rt.executor->submit(r, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("recompute_ratio"), std::string::npos) << st.message();
  r.recompute_ratio.reset();
  r.epic_k = -1;
  st = rt.executor->submit(r, c.sink(&out));
  EXPECT_NE(st.message().find("epic_k"), std::string::npos) << st.message();
  RunRequest plain;
  plain.prompt = "hello";
  plain.reuse = ReuseMode::kEpic;
  st = rt.executor->submit(plain, c.sink(&out));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("pipeline run"), std::string::npos) << st.message();
  EXPECT_EQ(parse_reuse_mode("blend").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parse_reuse_mode("blend").status().message().find("cacheblend"), std::string::npos);
  close(rt);
}

TEST_F(ExecutorTest, PlainPromptsAndChatRunWithPrefixReuse) {
  Runtime rt = open(options(""), false);
  Collector c;
  RunOutput a, b;
  RunRequest r;
  r.prompt = "The harbor was quiet when the ship came in, and the sailor";
  r.sampling.max_tokens = 5;
  r.sampling.ignore_eos = true;
  r.reuse = ReuseMode::kNone;
  ASSERT_TRUE(rt.executor->submit(r, c.sink(&a)).ok());
  ASSERT_TRUE(c.wait(&a));
  r.reuse = ReuseMode::kPrefix;
  ASSERT_TRUE(rt.executor->submit(r, c.sink(&b)).ok());
  ASSERT_TRUE(c.wait(&b));
  RunOutput b2;
  ASSERT_TRUE(rt.executor->submit(r, c.sink(&b2)).ok());
  ASSERT_TRUE(c.wait(&b2));
  expect_same(a, b, "prefix first");
  expect_same(a, b2, "prefix hit");
  EXPECT_GT(b2.usage.reused[kvstore::Tier::kHbm], 0);
  RunOutput chat;
  RunRequest cr;
  cr.messages = {{"system", "be brief"}, {"user", "hello there"}};
  cr.sampling.max_tokens = 4;
  cr.sampling.ignore_eos = true;
  ASSERT_TRUE(rt.executor->submit(cr, c.sink(&chat)).ok());
  ASSERT_TRUE(c.wait(&chat));
  EXPECT_EQ(chat.tokens.size(), 4u);
  // A pipeline needs the corpus: without data_dir the run fails with a reason.
  RunRequest pr;
  pr.pipeline = "default";
  pr.query = "x";
  RunOutput p;
  ASSERT_TRUE(rt.executor->submit(pr, c.sink(&p)).ok());
  ASSERT_TRUE(c.wait(&p));
  EXPECT_NE(p.error.message().find("data_dir"), std::string::npos) << p.error.message();
  rt.stop();
}

// A small pool under steady load: a run's published documents get lower-tier copies queued, which
// hold forks of their pool blocks and start only while the engine is idle; a second run that keeps
// the engine busy then grows into those blocks. When the scheduler can plan nothing, the engine is
// idle for the copies, which finish and give their blocks back: the long run completes (it used to
// swap out and in on every step for ever, the daemon's tiny-pool stall).
TEST_F(ExecutorTest, SmallPoolMakesProgressWhileDocumentCopiesHoldBlocks) {
  const std::string data = tmpdir("copy_stall");
  const char* qa = "volcano magma eruption";
  const char* qb = "chess knight gambit";
  RunOutput ref_a, ref_b_prompt;
  {
    Runtime rt = open(options(data), true);
    ref_a = run(*rt.executor, "none", qa, 48);
    ref_b_prompt = run(*rt.executor, "none", qb, 1);
    close(rt);
  }
  // 48 blocks of 16 tokens: the long run alone fills 46 of them, so it cannot finish beside the
  // first run's cached documents while their copies hold them; both prompts fit in half the pool,
  // so the first run's copies are started (not skipped under pool pressure).
  const int blocks = 48;
  const int long_tokens = (blocks - 2) * 16 - ref_b_prompt.usage.prompt_tokens;
  ASSERT_GT(long_tokens, 16 * 16);
  RunOutput ref_b;
  {
    Runtime rt = open(options(data), false);
    ref_b = run(*rt.executor, "none", qb, long_tokens);
    close(rt);
  }
  RuntimeOptions o = options(data);
  o.model.kv_pool_bytes = size_t{16} * 512 * blocks;
  Runtime rt = open(o, false);
  RunOutput a, b;
  Collector c;
  auto submit = [&](const char* pipeline, const char* q, int max_tokens, const char* id, RunOutput* out) {
    RunRequest r;
    r.id = id;
    r.pipeline = pipeline;
    r.query = q;
    r.sampling.max_tokens = max_tokens;
    r.sampling.ignore_eos = true;
    ASSERT_TRUE(rt.executor->submit(r, c.sink(out)).ok());
  };
  submit("knowledge_tree", qa, 48, "docs", &a);
  submit("none", qb, long_tokens, "long", &b);
  ASSERT_TRUE(c.wait(&a));
  const bool finished = c.wait(&b, 60);
  if (!finished) {
    const ExecutorStats st = rt.executor->stats();
    ADD_FAILURE() << "the long run stalled after " << b.tokens.size() << " of " << long_tokens << " tokens: "
                  << st.to_json();
    rt.executor->cancel("long");
    c.wait(&b);
  }
  ASSERT_TRUE(finished);
  ASSERT_TRUE(a.error.ok()) << a.error.to_string();
  ASSERT_TRUE(b.error.ok()) << b.error.to_string();
  expect_same(ref_a, a, "the documents' run");
  expect_same(ref_b, b, "the long run");
  close(rt);
  fs::remove_all(data);
}

}  // namespace
}  // namespace ragd::pipelines

namespace ragd::pipelines {
namespace {

// The generator's reranker caches each passage's prompt head (the tenant's documents) under the
// request's whole KV scope: the same tenant with another cache_salt prefills its own heads, the
// same salt again finds them.
TEST_F(ExecutorTest, RerankerHeadsAreCachedPerTenantAndCacheSalt) {
  const std::string data = tmpdir("rerank-salt");
  const std::string pipes = tmpdir("rerank-salt-pipelines");
  Runtime rt = open_with_pipeline(data, pipes, "rr.toml",
                                  "[pipeline]\nname = \"rr\"\n[retriever]\ntop_k = 3\nrerank = 1\n[reuse]\nmode = \"none\"\n"
                                  "[generation]\nmax_tokens = 3\n");
  auto with = [](std::string tenant, std::string salt) {
    return [tenant, salt](RunRequest& r) {
      r.kv_scope = tenant;
      r.cache_salt = salt;
    };
  };
  const std::string q = kQueries[0];
  auto stats = [&] { return rt.executor->stats(); };
  const ExecutorStats s0 = stats();
  RunOutput a = run(*rt.executor, "rr", q, 3, with("acme", "s1"));
  const ExecutorStats s1 = stats();
  ASSERT_EQ(a.sources.size(), 1u);
  const uint64_t m = s1.rerank_head_misses - s0.rerank_head_misses;  // one head per passage reranked
  ASSERT_GE(m, 2u);
  EXPECT_EQ(s1.rerank_head_hits, s0.rerank_head_hits);
  run(*rt.executor, "rr", q, 3, with("acme", "s1"));
  const ExecutorStats s2 = stats();
  EXPECT_EQ(s2.rerank_head_hits - s1.rerank_head_hits, m) << "the same tenant and salt reuse the heads";
  EXPECT_EQ(s2.rerank_head_misses, s1.rerank_head_misses);
  RunOutput b = run(*rt.executor, "rr", q, 3, with("acme", "s2"));
  const ExecutorStats s3 = stats();
  EXPECT_EQ(s3.rerank_head_misses - s2.rerank_head_misses, m) << "another cache_salt reused heads of s1";
  EXPECT_EQ(s3.rerank_head_hits, s2.rerank_head_hits);
  run(*rt.executor, "rr", q, 3, with("other", "s1"));
  const ExecutorStats s4 = stats();
  EXPECT_EQ(s4.rerank_head_misses - s3.rerank_head_misses, m) << "another tenant reused acme's heads";
  // Whose cache the heads came from changes nothing in the answer.
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(b.sources.size(), 1u);
  EXPECT_EQ(a.sources[0].chunk_id, b.sources[0].chunk_id);
  EXPECT_NE(stats().to_json().find("\"reranker\":{\"head_hits\""), std::string::npos);
  close(rt);
  fs::remove_all(data);
  fs::remove_all(pipes);
}

// [retriever] min_score_ratio: the helper against a naive filter on random scores, then through the
// executor, where the passages kept are those of the same search without the cut whose score is at
// least the ratio of the best one's.
TEST(MinScoreRatio, KeepsTheFirstAndThoseAboveTheRatio) {
  std::mt19937_64 rng(31);
  std::uniform_real_distribution<double> u(0.0, 10.0);
  for (int n = 0; n < 200; ++n) {
    std::vector<ContextDoc> docs(1 + rng() % 7);
    for (size_t i = 0; i < docs.size(); ++i) {
      docs[i].chunk_id = i;
      docs[i].source.score = static_cast<float>(u(rng));
    }
    std::sort(docs.begin(), docs.end(), [](const ContextDoc& a, const ContextDoc& b) { return a.source.score > b.source.score; });
    if (n % 10 == 0) docs[0].source.score = 0;  // no positive first score: nothing is cut
    const double ratio = n % 4 == 0 ? 0.0 : u(rng) / 10.0;
    std::vector<uint64_t> want;
    for (size_t i = 0; i < docs.size(); ++i)
      if (i == 0 || ratio <= 0 || !(docs[0].source.score > 0) || docs[i].source.score >= ratio * docs[0].source.score)
        want.push_back(docs[i].chunk_id);
    keep_above_score_ratio(docs, ratio);
    EXPECT_EQ(chunk_ids(docs), want) << n;
  }
}

TEST_F(ExecutorTest, MinScoreRatioLeavesWeakPassagesOut) {
  const std::string data = tmpdir("min-ratio");
  const std::string pdir = tmpdir("min-ratio-pipelines");
  fs::create_directories(pdir);
  const std::string body = "[reuse]\nmode = \"none\"\n[generation]\nmax_tokens = 3\n";
  write_file(fs::path(pdir) / "all.toml", "[pipeline]\nname = \"all\"\n[retriever]\ntop_k = 4\nmode = \"lexical\"\nmin_score_ratio = 0\n" + body);
  Runtime rt = open_with_pipeline(data, pdir, "cut.toml",
                                  "[pipeline]\nname = \"cut\"\n[retriever]\ntop_k = 4\nmode = \"lexical\"\n"
                                  "min_score_ratio = 0.6\n" + body);
  Executor& ex = *rt.executor;
  int cut_some = 0;
  for (const char* q : {"volcano lava notes", "glacier moraine ice entry", "notes about the entry number 48 describes",
                        "volcano glacier desert"}) {
    const RunOutput all = run(ex, "all", q, 3);
    const RunOutput cut = run(ex, "cut", q, 3);
    ASSERT_TRUE(all.error.ok() && cut.error.ok()) << q;
    ASSERT_FALSE(all.sources.empty()) << q;
    // Sources go out in prompt order: compare as sets, against the best score of the uncut search.
    float top = 0;
    for (const Source& s : all.sources) top = std::max(top, s.score);
    std::vector<uint64_t> want, got;
    for (const Source& s : all.sources)
      if (s.score >= 0.6 * top) want.push_back(s.chunk_id);
    for (const Source& s : cut.sources) got.push_back(s.chunk_id);
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    EXPECT_EQ(got, want) << q;
    cut_some += got.size() < all.sources.size();
  }
  EXPECT_GT(cut_some, 0) << "no question had a passage below the ratio: the test shows nothing";
  close(rt);
  fs::remove_all(data);
  fs::remove_all(pdir);
}

// With term vectors the corpus searches hybrid (weighted fusion): the cut applies to the fused
// score, 0.7 of the first's when the pipeline sets none; an explicit ratio applies as set; rrf
// fusion is not cut (ranks_by_ratio_score).
TEST_F(ExecutorTest, MinScoreRatioCutsTheFusedScoreOfHybridSearch) {
  const std::string tv = std::string(RAGD_SOURCE_DIR) + "/models/ragd-termvec";
  if (!fs::exists(tv + "/config.json")) GTEST_SKIP() << "models/ragd-termvec absent";
  const std::string data = tmpdir("min-ratio-hybrid");
  const std::string pdir = tmpdir("min-ratio-hybrid-pipelines");
  fs::create_directories(pdir);
  const std::string body = "[reuse]\nmode = \"none\"\n[generation]\nmax_tokens = 3\n";
  write_file(fs::path(pdir) / "all.toml", "[pipeline]\nname = \"all\"\n[retriever]\ntop_k = 4\nmin_score_ratio = 0\n" + body);
  write_file(fs::path(pdir) / "half.toml", "[pipeline]\nname = \"half\"\n[retriever]\ntop_k = 4\nmin_score_ratio = 0.5\n" + body);
  write_file(fs::path(pdir) / "dflt.toml", "[pipeline]\nname = \"dflt\"\n[retriever]\ntop_k = 4\n" + body);
  RuntimeOptions o = options(data);
  o.pipelines_dir = pdir;
  o.embedder = EmbedderKind::kTermvec;
  o.embedder_model_dir = tv;
  Runtime rt = open(o, true);
  // Served as embedding:termvec, reading words like the hashing embedder (token ids as text).
  EXPECT_EQ(rt.documents->embedder_info().name, "termvec");
  EXPECT_EQ(rt.documents->embedder_info().dim, 256);
  Executor& ex = *rt.executor;
  int cut_some = 0;
  for (const char* q : {"volcano lava notes", "glacier moraine ice entry", "notes about the entry number 48 describes",
                        "volcano glacier desert"}) {
    const RunOutput all = run(ex, "all", q, 3);
    ASSERT_TRUE(all.error.ok()) << q;
    ASSERT_FALSE(all.sources.empty()) << q;
    float top = 0;
    for (const Source& s : all.sources) top = std::max(top, s.score);
    // Fused scores (0.3 x BM25 / best + 0.7 x cosine) lie in (0, 1]; BM25 scores would not.
    EXPECT_LE(top, 1.0f + 1e-5f) << q;
    for (const auto& [name, ratio] : {std::pair<const char*, double>{"half", 0.5}, {"dflt", kFusedScoreRatio}}) {
      const RunOutput cut = run(ex, name, q, 3);
      ASSERT_TRUE(cut.error.ok()) << q;
      std::vector<uint64_t> want, got;
      for (const Source& s : all.sources)
        if (s.score >= ratio * top) want.push_back(s.chunk_id);
      for (const Source& s : cut.sources) got.push_back(s.chunk_id);
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      EXPECT_EQ(got, want) << q << " " << name;
      cut_some += got.size() < all.sources.size();
    }
  }
  EXPECT_GT(cut_some, 0) << "no question had a passage below the ratio: the test shows nothing";
  close(rt);
  fs::remove_all(data);
  fs::remove_all(pdir);
}

}  // namespace
}  // namespace ragd::pipelines
