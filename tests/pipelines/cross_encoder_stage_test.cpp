// The cross-encoder reranking stage (pipelines/src/cross_encoder_stage.h): the passages it keeps
// and their order are those of CrossEncoderReranker scores computed here independently on the
// decoded passage texts; `keep` bounds the result; ties keep the retriever's order.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

#include "cross_encoder_stage.h"
#include "ragd/engine/bert_model.h"
#include "ragd/engine/encoder_dir.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::pipelines {
namespace {

namespace fs = std::filesystem;

TEST(CrossEncoderStage, KeepsTheBestByTheCrossEncodersScores) {
  const fs::path dir = fs::temp_directory_path() / ("ragd_ce_stage_" + std::to_string(::getpid()));
  engine::EncoderDirOptions o;
  o.config = *engine::bert_preset_config("bert-tiny");
  o.config.architecture = "BertForSequenceClassification";
  o.config.num_labels = 1;
  o.seed = 5;
  ASSERT_TRUE(engine::write_random_encoder_dir(dir.string(), o).ok());
  auto ce = retrieval::CrossEncoderReranker::load(dir.string());
  ASSERT_TRUE(ce.ok()) << ce.status().to_string();
  std::shared_ptr<const retrieval::CrossEncoderReranker> model(std::move(*ce));
  auto tok = engine::Tokenizer::from_file(std::string(RAGD_SOURCE_DIR) + "/models/ragd-qa/tokenizer.json");
  ASSERT_TRUE(tok.ok());
  std::shared_ptr<const engine::Tokenizer> gen_tok(std::move(*tok));

  const std::vector<std::string> passages = {
      "The harbour of Velmora opens at dawn.", "Tulips bloom in the spring garden.",
      "The archive keeps the city's old maps.", "Bakers in Ostrel rise before the sun.",
      "A lighthouse guards the northern cape.", "The council meets on the first day of the month."};
  std::vector<ContextDoc> docs;
  for (size_t i = 0; i < passages.size(); ++i) {
    ContextDoc d;
    d.chunk_id = 100 + i;
    d.tokens = gen_tok->encode(passages[i], false, false);
    docs.push_back(std::move(d));
  }
  const std::string q = "When does the harbour open?";
  // Expected: the scores of the decoded texts, best first, ties in retrieval order.
  std::vector<std::string> decoded;
  for (const auto& d : docs) decoded.push_back(gen_tok->decode(d.tokens, true));
  EXPECT_EQ(decoded[0], passages[0]) << "the stage reads the passage text back";
  std::vector<std::string_view> views(decoded.begin(), decoded.end());
  std::vector<float> scores;
  ASSERT_TRUE(model->score(q, views, &scores).ok());
  std::vector<size_t> order(docs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });

  CrossEncoderStage stage(model, gen_tok);
  PipelineSpec spec;
  spec.rerank = 3;
  std::vector<ContextDoc> kept = docs;
  ASSERT_TRUE(stage.keep_best(spec, q, "", &kept).ok());
  ASSERT_EQ(kept.size(), 3u);
  for (size_t i = 0; i < kept.size(); ++i) EXPECT_EQ(kept[i].chunk_id, docs[order[i]].chunk_id) << i;
  std::vector<ContextDoc> all = docs;
  ASSERT_TRUE(stage.keep_best(spec, q, "", &all, /*keep=*/10).ok());
  EXPECT_EQ(all.size(), docs.size());
  std::vector<ContextDoc> none = docs;
  EXPECT_FALSE(stage.keep_best(spec, "", "", &none).ok()) << "an empty question is refused";

  // Equal scores keep the retriever's order (the same passage twice).
  std::vector<ContextDoc> twins = {docs[1], docs[1], docs[1]};
  twins[0].chunk_id = 7;
  twins[1].chunk_id = 3;
  twins[2].chunk_id = 9;
  ASSERT_TRUE(stage.keep_best(spec, q, "", &twins, 2).ok());
  ASSERT_EQ(twins.size(), 2u);
  EXPECT_EQ(twins[0].chunk_id, 7u);
  EXPECT_EQ(twins[1].chunk_id, 3u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ragd::pipelines
