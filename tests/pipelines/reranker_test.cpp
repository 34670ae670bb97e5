// The reranker (pipelines/src/reranker.h) on the committed QA model: each passage's score equals
// log P(question | passage) computed independently, token by token through decode steps (f32 KV;
// prefill and decode sum in different orders: 1e-3 absolute on sums of ~10-25 log-probabilities),
// and the gold passage of held-out questions scores above three other passages of the QA corpus;
// cached prompt heads (and their eviction from a small pool) change no score.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ragd/engine/model.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/prompt_builder.h"
#include "reranker.h"
#include "speculation_cache.h"
#include "simdjson.h"

namespace ragd::pipelines {
namespace {

const std::string kModel = std::string(RAGD_SOURCE_DIR) + "/models/ragd-qa";

std::vector<std::pair<std::string, std::string>> read_jsonl(const std::string& path, const char* a, const char* b) {
  std::ifstream f(path);
  std::vector<std::pair<std::string, std::string>> out;
  simdjson::dom::parser p;
  for (std::string line; std::getline(f, line);) {
    simdjson::dom::element e = p.parse(line);
    out.emplace_back(std::string(std::string_view(e[a])), std::string(std::string_view(e[b])));
  }
  return out;
}

// log P(question tokens | prompt before them), one decode step per token.
double decode_log_prob(engine::Model& m, const std::vector<int32_t>& prefix, const std::vector<int32_t>& question) {
  engine::BlockTable t;
  engine::StepOutput o;
  engine::SeqStep s{&t, prefix, engine::SeqStep::Logits::kLast};
  EXPECT_TRUE(m.forward({&s, 1}, &o).ok());
  double total = 0.0;
  for (size_t i = 0; i < question.size(); ++i) {
    const auto row = o.row(0);
    const float mx = *std::max_element(row.begin(), row.end());
    double z = 0.0;
    for (float v : row) z += std::exp(static_cast<double>(v) - mx);
    total += row[question[i]] - mx - std::log(z);
    engine::SeqStep d{&t, std::span(&question[i], 1), engine::SeqStep::Logits::kLast};
    EXPECT_TRUE(m.forward({&d, 1}, &o).ok());
  }
  t.release(m.kv_pool());
  return total;
}

TEST(Reranker, ScoresAreLogProbabilitiesOfTheQuestionAndFindTheGoldPassage) {
  engine::ModelOptions mo;
  mo.num_threads = 2;
  mo.kv_pool_bytes = size_t{64} << 20;
  auto scorer = engine::Model::load(kModel, mo);
  ASSERT_TRUE(scorer.ok()) << scorer.status().to_string();
  auto ref = engine::Model::load(kModel, mo);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  auto tok = engine::Tokenizer::from_file(kModel + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  Reranker rr(std::move(*scorer), **tok);
  engine::ModelOptions tiny = mo;
  tiny.kv_pool_bytes = size_t{2} << 20;  // 256 tokens of this model's f32 KV
  auto small_model = engine::Model::load(kModel, tiny);
  ASSERT_TRUE(small_model.ok()) << small_model.status().to_string();
  Reranker small(std::move(*small_model), **tok);
  PromptBuilder prompts(**tok, (*ref)->config());
  const PipelineSpec spec = default_pipeline_spec();

  const auto corpus = read_jsonl(std::string(RAGD_SOURCE_DIR) + "/examples/qa_eval/corpus.jsonl", "id", "text");
  const auto questions = read_jsonl(std::string(RAGD_SOURCE_DIR) + "/examples/qa_eval/questions.jsonl", "question", "gold");
  auto text_of = [&](const std::string& id) {
    for (const auto& [i, t] : corpus)
      if (i == id) return t;
    ADD_FAILURE() << "no document " << id;
    return std::string();
  };
  for (int qi = 0; qi < 5; ++qi) {
    const auto& [question, gold] = questions[qi * 37];
    // The gold passage among three others (fixed, spread over the corpus), gold not first.
    std::vector<std::vector<int32_t>> docs;
    const std::string others[3] = {corpus[(qi * 53 + 7) % corpus.size()].first, corpus[(qi * 91 + 130) % corpus.size()].first,
                                   corpus[(qi * 29 + 250) % corpus.size()].first};
    int gold_at = 1 + qi % 3;
    for (int i = 0, o = 0; i < 4; ++i) docs.push_back((*tok)->encode(i == gold_at ? text_of(gold) : text_of(others[o++])));
    auto scores = rr.score(spec, docs, question, "");
    ASSERT_TRUE(scores.ok()) << scores.status().to_string();
    ASSERT_EQ(scores->size(), 4u);
    for (int i = 0; i < 4; ++i) {
      // Independent: the question's tokens found by encoding the prompt with and without it.
      const std::span<const std::vector<int32_t>> one(&docs[i], 1);
      const std::vector<int32_t> with = prompts.build_rag(spec, one, question).flat();
      const std::vector<int32_t> without = prompts.build_rag(spec, one, "").flat();
      size_t p = 0;
      while (p < without.size() && with[p] == without[p]) ++p;
      size_t s = 0;
      while (s < without.size() - p && with[with.size() - 1 - s] == without[without.size() - 1 - s]) ++s;
      const std::vector<int32_t> prefix(with.begin(), with.begin() + p);
      const std::vector<int32_t> q(with.begin() + p, with.end() - s);
      ASSERT_GE(q.size(), 5u);
      EXPECT_NEAR((*scores)[i], decode_log_prob(**ref, prefix, q), 1e-3) << "question " << qi * 37 << " passage " << i;
    }
    const int best = static_cast<int>(std::max_element(scores->begin(), scores->end()) - scores->begin());
    EXPECT_EQ(best, gold_at) << "question " << qi * 37 << ": " << question;
    // Again: the passages' prompt heads now come from the cache, the scores do not change; and a
    // reranker whose pool holds about two heads evicts on the way and gives the same scores.
    auto again = rr.score(spec, docs, question, "");
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ(*again, *scores);
    auto tight = small.score(spec, docs, question, "");
    ASSERT_TRUE(tight.ok()) << tight.status().to_string();
    for (int i = 0; i < 4; ++i) EXPECT_NEAR((*tight)[i], (*scores)[i], 1e-9) << "passage " << i;
  }
  EXPECT_EQ(rr.score(spec, std::vector<std::vector<int32_t>>(1, std::vector<int32_t>{5, 6}), "", "").status().code(),
            StatusCode::kInvalidArgument);

  // Heads are scoped: tenant alpha's heads serve alpha again, never beta (the same passages and
  // question), and the scores do not depend on whose cache they came from.
  {
    const auto& [question, gold] = questions[11];
    std::vector<std::vector<int32_t>> docs;
    for (int i = 0; i < 3; ++i) docs.push_back((*tok)->encode(corpus[(i * 71 + 400) % corpus.size()].second));
    docs.push_back((*tok)->encode(text_of(gold)));
    const Reranker::Stats s0 = rr.stats();
    auto a1 = rr.score(spec, docs, question, "alpha");
    ASSERT_TRUE(a1.ok()) << a1.status().to_string();
    const Reranker::Stats s1 = rr.stats();
    EXPECT_EQ(s1.head_misses - s0.head_misses, 4u);
    auto a2 = rr.score(spec, docs, question, "alpha");
    ASSERT_TRUE(a2.ok());
    const Reranker::Stats s2 = rr.stats();
    EXPECT_EQ(s2.head_hits - s1.head_hits, 4u);
    EXPECT_EQ(s2.head_misses, s1.head_misses);
    auto b1 = rr.score(spec, docs, question, "beta");
    ASSERT_TRUE(b1.ok());
    const Reranker::Stats s3 = rr.stats();
    EXPECT_EQ(s3.head_misses - s2.head_misses, 4u) << "beta reused heads alpha computed";
    EXPECT_EQ(s3.head_hits, s2.head_hits);
    for (int i = 0; i < 4; ++i) {
      EXPECT_NEAR((*b1)[i], (*a1)[i], 1e-9);
      EXPECT_EQ((*a2)[i], (*a1)[i]);
    }
    // The reranking stage keeps the best spec.rerank passages, best first.
    std::vector<ContextDoc> ctx;
    for (int i = 0; i < 4; ++i) ctx.push_back(ContextDoc{static_cast<uint64_t>(10 + i), docs[static_cast<size_t>(i)], {}});
    PipelineSpec two = spec;
    two.rerank = 2;
    ASSERT_TRUE(rr.keep_best(two, question, "alpha", &ctx).ok());
    std::vector<int> order = {0, 1, 2, 3};
    std::stable_sort(order.begin(), order.end(), [&](int x, int y) { return (*a1)[x] > (*a1)[y]; });
    ASSERT_EQ(ctx.size(), 2u);
    EXPECT_EQ(ctx[0].chunk_id, static_cast<uint64_t>(10 + order[0]));
    EXPECT_EQ(ctx[1].chunk_id, static_cast<uint64_t>(10 + order[1]));
  }
}

}  // namespace
}  // namespace ragd::pipelines
