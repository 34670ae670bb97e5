// Speculative decoding with a draft model (model_drafter.h, speculative method "draft"): the
// drafter's chain drafts against plain greedy decoding of the draft model from scratch, through
// drafts, rollbacks to random accepted prefixes and batched runs; then through the executor, the
// output with draft-model drafts is the output without drafts (greedy and seeded sampling, one run
// and a batch), with a draft model that agrees with the serving model (its own weights: drafts
// accepted) and one that does not (other random weights: drafts rejected and rolled back); every
// KV block of both pools goes back; and a missing, incompatible or unknown draft model is a clear
// error while the server keeps serving. The step budget with the draft model's time, and the
// draft-model gate (draft_model_pays) against the exact expected time of a run, prefill included;
// through the executor, a draft model whose drafts are rejected is turned down.
#include "executor_fixture.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "draft_budget.h"
#include "draft_budget_testing.h"
#include "model_drafter.h"
#include "ragd/engine/model.h"

namespace ragd::pipelines {
namespace {

// A random model with the fixture model's tokenizer and vocabulary and `layers` layers, seeded.
std::string make_draft_model(const std::string& dir, int layers, uint64_t seed, int vocab = 512) {
  const std::string tok_json = testing::tiny_bpe_json();
  auto tok = engine::Tokenizer::from_json(tok_json, "tokenizer.json");
  EXPECT_TRUE(tok.ok());
  engine::ModelConfig c = engine::testing::tiny_config(engine::testing::Variant::kLlama);
  c.vocab_size = vocab;
  c.num_hidden_layers = layers;
  c.max_position_embeddings = 2048;
  c.bos_token_id = (*tok)->bos_id().value_or(-1);
  if (auto e = (*tok)->token_to_id("<|eot_id|>")) c.eos_token_ids.push_back(*e);
  EXPECT_TRUE(c.validate().ok());
  const std::map<std::string, engine::OwnedTensor> t = engine::random_weight_tensors(c, seed);
  fs::create_directories(dir);
  write_file(fs::path(dir) / "config.json", c.to_json());
  write_file(fs::path(dir) / "tokenizer.json", tok_json);
  EXPECT_TRUE(engine::write_safetensors((fs::path(dir) / "model.safetensors").string(), t).ok());
  return dir;
}

// Greedy continuation of `tokens` by `m` from an empty KV (the reference the drafter must equal).
std::vector<int32_t> greedy_from_scratch(engine::Model& m, std::vector<int32_t> tokens, int n) {
  std::vector<int32_t> out;
  for (int j = 0; j < n; ++j) {
    engine::BlockTable t;
    engine::SeqStep s{&t, tokens, engine::SeqStep::Logits::kGreedy};
    engine::StepOutput o;
    EXPECT_TRUE(m.forward({&s, 1}, &o).ok());
    t.release(m.kv_pool());
    out.push_back(o.picks[0].token);
    tokens.push_back(o.picks[0].token);
  }
  return out;
}

// The step budget with drafts that cost time to make (a draft model's step per token): the choice
// against every choice, expected tokens per modelled second (the step's rows plus the drafting);
// a draft model as dear as the serving model's step is turned down where a free draft rides.
TEST(DraftBudget, WeighsTheDraftModelsTimeLikeBruteForce) {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 400; ++trial) {
    const draft_testing::RandomCost cost = draft_testing::random_fitted_cost(rng);
    const StepCostModel& m = cost.model;
    ASSERT_TRUE(m.fitted());
    const int decodes = 1 + static_cast<int>(rng() % 4);
    std::vector<DraftCandidate> c(1 + rng() % 3);
    for (auto& x : c) {
      x = {static_cast<int>(rng() % 5), static_cast<double>(rng() % 101) / 100.0};
      if (rng() % 3) x.draft_s = cost.fixed * static_cast<double>(rng() % 80) / 100.0;  // up to 0.8 of the fixed cost
    }
    const std::vector<int> got = choose_draft_lengths(m, decodes, c);
    const double best = draft_testing::best_rate(m, decodes, c);
    for (size_t i = 0; i < c.size(); ++i) ASSERT_LE(got[i], c[i].available);
    EXPECT_NEAR(draft_testing::expected_rate(m, decodes, c, got), best, 1e-9 * best) << "trial " << trial;
  }
  const StepCostModel cheap = draft_testing::fitted_cost(10e-3, 0.1e-3, 9);
  EXPECT_GE(choose_draft_lengths(cheap, 1, std::vector<DraftCandidate>{{8, 0.6, 0.0}})[0], 6);  // free: rides long
  // A draft token costing a whole step pays only when it is nearly sure: at alpha 0.6 none rides.
  EXPECT_EQ(choose_draft_lengths(cheap, 1, std::vector<DraftCandidate>{{8, 0.6, 10e-3}}), (std::vector<int>{0}));
  EXPECT_GT(choose_draft_lengths(cheap, 1, std::vector<DraftCandidate>{{8, 0.99, 2e-3}})[0], 4);
}

// The exact expected seconds for one run (batch 1) to make `remaining` tokens when every step
// verifies a k-token draft (token j accepted with probability alpha^j; the first rejection ends
// the step's accepted prefix) and costs t + k * price: a recursion over the tokens left, end
// effects included.
double expected_run_seconds(double t, double price, double alpha, int k, int remaining) {
  std::vector<double> v(static_cast<size_t>(remaining) + 1, 0.0);  // v[r]: r tokens left
  for (int r = 1; r <= remaining; ++r) {
    double e = t + k * price, p = 1;
    for (int a = 0; a <= k; ++a) {  // a draft tokens accepted: 1 + a tokens made
      const double pa = a < k ? p * (1 - alpha) : p;
      e += pa * v[static_cast<size_t>(std::max(0, r - 1 - a))];
      p *= alpha;
    }
    v[static_cast<size_t>(r)] = e;
  }
  return v[static_cast<size_t>(remaining)];
}

// The draft-model gate (draft_model_pays) against the exact expected time of the run: drafting
// with the model pays when the best draft length's expected time plus what the model must be fed
// first (the prompt's prefill) is below the time without drafts (no n-gram draft to rival it).
// Cases within a step's time or two of the line are left out (the gate's sum is a renewal
// estimate without the run's end). Then the rival and the shapes seen on this model.
TEST(DraftModelGate, PaysForThePrefillOnlyWhereTheRunsExpectedTimeSaysSo) {
  std::mt19937_64 rng(21);
  int judged = 0, pays = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const draft_testing::RandomCost cost = draft_testing::random_fitted_cost(rng);
    const double t = cost.model.seconds(1);
    DraftCandidate c{1 + static_cast<int>(rng() % 8), static_cast<double>(rng() % 101) / 100.0,
                     cost.fixed * static_cast<double>(rng() % 80) / 100.0};
    const int remaining = 1 + static_cast<int>(rng() % 400);
    const double feed_s = t * static_cast<double>(rng() % 1000) / 10.0;  // 0 .. 100 steps' time
    const double price = cost.model.per_row_s() + c.draft_s;
    double best = remaining * t;  // k = 0: no drafts
    for (int k = 1; k <= c.available; ++k) best = std::min(best, expected_run_seconds(t, price, c.alpha, k, remaining));
    const double margin = remaining * t - (best + feed_s);  // > 0: drafting with the model pays
    if (std::abs(margin) < 2 * (t + c.available * price)) continue;
    ++judged;
    pays += margin > 0;
    EXPECT_EQ(draft_model_pays(cost.model, 1, c, remaining, feed_s), margin > 0)
        << "trial " << trial << ": alpha " << c.alpha << " k<=" << c.available << " remaining " << remaining
        << " feed " << feed_s << " margin " << margin;
  }
  EXPECT_GT(judged, 1500);
  EXPECT_GT(pays, 200);
  EXPECT_GT(judged - pays, 200);
  // This model's shape on this machine (bench_speculative): a serving step of 0.85 ms + 0.25 ms per
  // row, a drafted token 0.26 ms, drafts accepted at 0.8 per token, a 600-token prompt's prefill at
  // 0.02 ms a token (12 ms). A 16-token answer does not repay the prefill, a 300-token one does;
  // once the prompt is in (nothing to feed), the 16-token answer drafts too.
  const StepCostModel m = draft_testing::fitted_cost(0.85e-3, 0.25e-3);
  const DraftCandidate good{8, 0.8, 0.26e-3};
  EXPECT_FALSE(draft_model_pays(m, 1, good, 16, 12e-3));
  EXPECT_TRUE(draft_model_pays(m, 1, good, 300, 12e-3));
  EXPECT_TRUE(draft_model_pays(m, 1, good, 16, 0.0));
  // Drafts accepted at 0.3 save nothing at any length, prefill or not; nor do good ones at a large
  // batch whose rows are dear.
  EXPECT_EQ(draft_saving(m, 1, DraftCandidate{8, 0.3, 0.26e-3}, 1000), 0.0);
  EXPECT_FALSE(draft_model_pays(m, 1, DraftCandidate{8, 0.3, 0.26e-3}, 1000, 0.0));
  EXPECT_FALSE(draft_model_pays(draft_testing::fitted_cost(1e-3, 1e-3, 9), 64, good, 1000, 0.0));
  // Against the n-gram lookup's draft of the same step (free to make, nothing to feed): one
  // accepted more often wins even with the prompt in; a rarely right one loses to the model, by
  // the model's saving less its prefill against the lookup's saving.
  const DraftCandidate copying{8, 0.9}, weak{8, 0.4};
  EXPECT_FALSE(draft_model_pays(m, 1, good, 300, 0.0, copying));
  EXPECT_TRUE(draft_model_pays(m, 1, good, 300, 12e-3, weak));
  const double edge = draft_saving(m, 1, good, 300) - draft_saving(m, 1, weak, 300);
  EXPECT_GT(draft_saving(m, 1, weak, 300), 0.0);
  EXPECT_TRUE(draft_model_pays(m, 1, good, 300, 0.99 * edge, weak));
  EXPECT_FALSE(draft_model_pays(m, 1, good, 300, 1.01 * edge, weak));
  // Where the lookup drafts most steps after a prefill, the model is left few to draft in: the
  // prefill that 300 tokens would repay, 30 of them (a share of 0.1) do not.
  EXPECT_TRUE(draft_model_pays(m, 1, good, 300, 12e-3, {}, 1.0));
  EXPECT_FALSE(draft_model_pays(m, 1, good, 300, 12e-3, {}, 0.1));
  EXPECT_EQ(draft_model_pays(m, 1, good, 300, 12e-3, {}, 0.1), draft_model_pays(m, 1, good, 30, 12e-3));
  // Before a fit: as the unfitted budget, while few runs decode, and only where the lookup has
  // nothing.
  const StepCostModel unfitted;
  EXPECT_TRUE(draft_model_pays(unfitted, 1, good, 16, 12e-3));
  EXPECT_FALSE(draft_model_pays(unfitted, 1, good, 16, 0.0, copying));
  EXPECT_FALSE(draft_model_pays(unfitted, kUnfittedMaxDecodes + 1, good, 300, 0.0));
  EXPECT_FALSE(draft_model_pays(m, 1, DraftCandidate{0, 0.8, 0.26e-3}, 300, 0.0));  // nothing proposed
  // The share: measured over the runs that paid a prefill, and back to the prior while none does.
  ModelShare share;
  EXPECT_DOUBLE_EQ(share.share(0.5, 32), 0.5);
  share.observe(4, 50, 0.9);  // 4 of the 50 tokens after the prefill came from model-drafted steps
  share.observe(6, 50, 0.9);
  EXPECT_DOUBLE_EQ(share.share(0.5, 0), (0.9 * 4 + 6) / (0.9 * 50 + 50));
  EXPECT_LT(share.share(0.5, 32), 0.25);
  for (int i = 0; i < 100; ++i) share.fade(0.9);
  EXPECT_NEAR(share.share(0.5, 32), 0.5, 1e-3);
}

class ModelDrafterTest : public ExecutorTest {
 protected:
  static std::string copy_prompt(int i) {
    const std::string passage = std::string("The ") + kTopics[i % 12] + " record says " + kTopics[(i + 5) % 12] + ".";
    return passage + "\n" + passage + "\nQuote the record: " + passage.substr(0, 16);
  }
};

TEST_F(ModelDrafterTest, ChainDraftsAreGreedyDecodingThroughRollbacks) {
  const std::string dir = make_draft_model(tmpdir("drafter-unit") + "/draft", 1, 77);
  engine::ModelOptions mo;
  mo.num_threads = 1;
  mo.kv_pool_bytes = 4ull << 20;
  auto loaded = engine::Model::load(dir, mo);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  auto reference = engine::Model::load(dir, mo);
  ASSERT_TRUE(reference.ok());
  ModelDrafter drafter(std::move(*loaded), dir);
  std::mt19937_64 rng(5);
  // Three runs drafting together; after each draft a random prefix of it is "accepted" and a
  // random token follows (the serving model's own), or the run is rolled back further.
  std::vector<std::vector<int32_t>> seqs(3);
  for (size_t r = 0; r < seqs.size(); ++r)
    for (int i = 0; i < 7 + 13 * static_cast<int>(r); ++i) seqs[r].push_back(static_cast<int32_t>(rng() % 500));
  int accepted_total = 0;
  for (int round = 0; round < 12; ++round) {
    std::vector<std::vector<int32_t>> drafts(seqs.size());
    std::vector<ModelDrafter::Request> reqs;
    std::vector<int> wanted;
    for (size_t r = 0; r < seqs.size(); ++r) {
      const int n = static_cast<int>(rng() % 6);  // 0..5 tokens (0: this run does not draft now)
      wanted.push_back(n);
      reqs.push_back({r + 1, seqs[r], n, &drafts[r]});
    }
    drafter.draft(reqs);
    for (size_t r = 0; r < seqs.size(); ++r) {
      ASSERT_EQ(drafts[r], greedy_from_scratch(**reference, seqs[r], wanted[r])) << "round " << round << " run " << r;
      const int keep = drafts[r].empty() ? 0 : static_cast<int>(rng() % (drafts[r].size() + 1));
      accepted_total += keep;
      seqs[r].insert(seqs[r].end(), drafts[r].begin(), drafts[r].begin() + keep);
      if (round % 5 == 4) seqs[r].resize(seqs[r].size() - std::min<size_t>(seqs[r].size() - 2, 3));  // a rollback
      seqs[r].push_back(static_cast<int32_t>(rng() % 500));
      drafter.settle(r + 1, seqs[r]);
    }
  }
  EXPECT_GT(accepted_total, 0);
  EXPECT_GT(drafter.stats().steps, 0u);
  EXPECT_GT(drafter.token_seconds(), 0.0);
  for (size_t r = 0; r < seqs.size(); ++r) drafter.forget(r + 1);
  EXPECT_EQ(drafter.stats().pool_used_blocks, 0u);
  fs::remove_all(fs::path(dir).parent_path());
}

TEST_F(ModelDrafterTest, OutputsAreThoseWithoutDraftsAndBothPoolsEmpty) {
  const std::string root = tmpdir("drafter-exec");
  // "same": the serving model's own weights (greedy drafts agree: accepted); "other": another
  // random model of one layer (drafts mostly rejected: rolled back).
  const std::string same = root + "/same";
  fs::create_directories(same);
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"})
    fs::copy_file(fs::path(options(root).model_dir) / f, fs::path(same) / f);
  const std::string other = make_draft_model(root + "/other", 1, 4321);
  for (const std::string& draft_dir : {same, other}) {
    const std::string data = root + "/data";
    fs::remove_all(data);
    RuntimeOptions o = options(data);
    o.model.kv_pool_bytes = 16ull << 20;
    o.hbm_cache = false;
    o.speculative.max_decodes = 8;
    o.speculative.draft_model = draft_dir;
    o.test_hooks.draft_budget_off = true;  // every proposal drafted and verified: this is about correctness
    Runtime rt = open(o, false);
    int drafted = 0, accepted = 0;
    // One run at a time: greedy and sampled, with and without drafts.
    for (int i = 0; i < 4; ++i) {
      for (const float temp : {0.0f, 0.9f}) {
        RunOutput x[2];
        for (int spec = 0; spec < 2; ++spec) {
          x[spec] = run(*rt.executor, "", "", 40, [&](RunRequest& r) {
            r.prompt = copy_prompt(i);
            r.sampling.temperature = temp;
            r.sampling.seed = 11 + static_cast<uint64_t>(i);
            r.speculative_k = spec ? 5 : 0;
            if (spec) r.speculative_method = DraftMethod::kDraft;
          });
        }
        EXPECT_EQ(x[0].tokens, x[1].tokens) << draft_dir << " prompt " << i << " temperature " << temp;
        EXPECT_EQ(x[0].usage.draft_steps, 0);
        EXPECT_EQ(x[1].usage.draft_method, "draft");
        drafted += x[1].usage.drafted_tokens;
        accepted += x[1].usage.accepted_tokens;
      }
    }
    // A batch of runs at once: the draft steps of several runs share draft-model steps.
    std::vector<RunOutput> out[2];
    for (int spec = 0; spec < 2; ++spec) {
      Collector c;
      out[spec].resize(6);
      for (int i = 0; i < 6; ++i) {
        RunRequest r;
        r.prompt = copy_prompt(i + 3);
        r.sampling.max_tokens = 32;
        r.sampling.ignore_eos = true;
        r.sampling.temperature = i % 2 ? 0.8f : 0.0f;
        r.sampling.seed = 40 + static_cast<uint64_t>(i);
        r.speculative_k = spec ? 6 : 0;
        r.speculative_method = DraftMethod::kDraft;
        ASSERT_TRUE(rt.executor->submit(r, c.sink(&out[spec][static_cast<size_t>(i)])).ok());
      }
      for (auto& x : out[spec]) {
        ASSERT_TRUE(c.wait(&x));
        ASSERT_TRUE(x.error.ok()) << x.error.to_string();
        drafted += x.usage.drafted_tokens;
        accepted += x.usage.accepted_tokens;
      }
    }
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out[0][static_cast<size_t>(i)].tokens, out[1][static_cast<size_t>(i)].tokens) << draft_dir << " batch run " << i;
    std::printf("%s: drafted %d, accepted %d\n", draft_dir.c_str(), drafted, accepted);
    EXPECT_GT(drafted, 0) << draft_dir;
    if (draft_dir == same) EXPECT_GT(accepted, drafted / 2) << "the serving model's own greedy drafts";
    if (draft_dir == other) EXPECT_LT(accepted, drafted) << "another model's drafts: some rejected and rolled back";
    ASSERT_TRUE(wait_until([&] {
      const ExecutorStats s = rt.executor->stats();
      return s.running == 0 && s.pool_free_blocks == s.pool_blocks && s.spec_draft_models.pool_used_blocks == 0;
    })) << rt.executor->stats_json();
    const ExecutorStats s = rt.executor->stats();
    EXPECT_EQ(s.spec_draft.drafted, static_cast<uint64_t>(drafted));
    EXPECT_EQ(s.spec_draft.accepted, static_cast<uint64_t>(accepted));
    EXPECT_EQ(s.spec_ngram.drafted, 0u);
    EXPECT_GT(s.spec_draft_models.steps, 0u);
    close(rt);
  }
  fs::remove_all(root);
}

// With the gate on (the default): a draft model whose drafts are rejected (other random weights)
// stops being drafted with once the estimates know it — within the first run, and from the start
// of the next (the server's estimate) — while its runs draft from the n-gram lookup instead; the
// outputs stay those without drafts.
TEST_F(ModelDrafterTest, RejectedDraftsTurnTheModelDown) {
  const std::string root = tmpdir("drafter-gate");
  const std::string other = make_draft_model(root + "/other", 1, 4321);
  RuntimeOptions o = options(root + "/data");
  o.model.kv_pool_bytes = 16ull << 20;
  o.hbm_cache = false;
  o.speculative.draft_model = other;
  Runtime rt = open(o, false);
  constexpr int kTokens = 160;
  auto long_run = [&](int k) {
    return run(*rt.executor, "", "", kTokens, [&](RunRequest& r) {
      r.prompt = copy_prompt(2);
      r.sampling.ignore_eos = true;
      r.speculative_k = k;
      if (k > 0) r.speculative_method = DraftMethod::kDraft;
    });
  };
  const RunOutput first = long_run(5);
  const ExecutorStats after_first = rt.executor->stats();
  const RunOutput second = long_run(5);
  const ExecutorStats after_second = rt.executor->stats();
  const RunOutput plain = long_run(0);
  ASSERT_EQ(plain.tokens.size(), static_cast<size_t>(kTokens));
  EXPECT_EQ(first.tokens, plain.tokens);
  EXPECT_EQ(second.tokens, plain.tokens);
  std::printf("first run: the model drafted %lu tokens (%lu accepted) in %lu steps, turned down in %lu steps; n-gram "
              "lookup drafted %lu\n",
              static_cast<unsigned long>(after_first.spec_draft.drafted), static_cast<unsigned long>(after_first.spec_draft.accepted),
              static_cast<unsigned long>(after_first.spec_draft.steps), static_cast<unsigned long>(after_first.spec_draft.turned_down),
              static_cast<unsigned long>(after_first.spec_ngram.drafted));
  // The first run drafted with the model until its rejections showed, then not again: a handful
  // of verifications in ~160 decode steps (without the gate a turned-down draft is still probed
  // every DraftHistory::probe_interval(1) steps).
  EXPECT_GT(after_first.spec_draft.steps, 0u);
  EXPECT_LT(after_first.spec_draft.accepted, after_first.spec_draft.drafted);
  EXPECT_LE(after_first.spec_draft.steps, 8u);
  EXPECT_GT(after_first.spec_draft.turned_down, 0u);
  // The second run never drafted with the model, and its draft KV was never fed.
  EXPECT_EQ(after_second.spec_draft.steps, after_first.spec_draft.steps);
  EXPECT_EQ(after_second.spec_draft_models.steps, after_first.spec_draft_models.steps);
  EXPECT_GT(after_second.spec_draft.turned_down, after_first.spec_draft.turned_down);
  close(rt);
  fs::remove_all(root);
}

TEST_F(ModelDrafterTest, BadDraftModelsAreClearErrors) {
  const std::string root = tmpdir("drafter-bad");
  {  // A directory that is not a model: the runtime does not start, and says which key named it.
    RuntimeOptions o = options(root + "/data1");
    o.speculative.draft_model = root + "/no-such-model";
    auto rt = open_runtime(o);
    ASSERT_FALSE(rt.ok());
    EXPECT_EQ(rt.status().code(), StatusCode::kInvalidArgument) << rt.status().to_string();
    EXPECT_NE(rt.status().message().find("runtime.speculative_draft_model"), std::string::npos) << rt.status().to_string();
    EXPECT_NE(rt.status().message().find("no-such-model"), std::string::npos) << rt.status().to_string();
  }
  {  // Another vocabulary: its ids are not the serving model's tokens.
    RuntimeOptions o = options(root + "/data2");
    o.speculative.draft_model = make_draft_model(root + "/vocab", 1, 9, 1024);
    auto rt = open_runtime(o);
    ASSERT_FALSE(rt.ok());
    EXPECT_NE(rt.status().message().find("vocabulary of 1024 ids"), std::string::npos) << rt.status().to_string();
  }
  {  // A pipeline naming a draft model with a method that does not use it: the spec is refused.
    const std::string pipelines = root + "/pipelines";
    fs::create_directories(pipelines);
    write_file(fs::path(pipelines) / "p.toml",
               "[pipeline]\nname = \"p\"\n[generation]\nspeculative = { method = \"ngram\", draft_model = \"x\" }\n");
    RuntimeOptions o = options(root + "/data3");
    o.pipelines_dir = pipelines;
    auto rt = open_runtime(o);
    ASSERT_FALSE(rt.ok());
    EXPECT_NE(rt.status().message().find("draft_model is for method \"draft\""), std::string::npos) << rt.status().to_string();
  }
  {  // A request naming a draft model the server did not load, or method draft without one: a
     // client error (400) at submit, and the server goes on serving.
    Runtime rt = open(options(root + "/data4"), false);
    RunRequest r;
    r.prompt = copy_prompt(0);
    r.sampling.max_tokens = 4;
    r.speculative_k = 4;
    r.draft_model = "/etc";
    Collector c;
    RunOutput out;
    Status st = rt.executor->submit(r, c.sink(&out));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("draft_model '/etc' is not loaded by this server (loaded: none"), std::string::npos) << st.to_string();
    r.draft_model.reset();
    r.speculative_method = DraftMethod::kDraft;
    st = rt.executor->submit(r, c.sink(&out));
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("needs a draft_model"), std::string::npos) << st.to_string();
    RunOutput ok = run(*rt.executor, "", "", 4, [&](RunRequest& q) { q.prompt = copy_prompt(1); });
    EXPECT_TRUE(ok.error.ok());
    EXPECT_EQ(ok.tokens.size(), 4u);
    close(rt);
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace ragd::pipelines
