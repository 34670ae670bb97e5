// The encoder embedder: pooling from the sentence-transformers files, prefixes, truncation,
// identity, bad checkpoints; embeddings against the independent PyTorch reference
// (bert_reference.py, skipped without python3-torch).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "encoder_test_util.h"
#include "ragd/engine/bert_model.h"
#include "ragd/engine/encoder_dir.h"
#include "ragd/retrieval/corpus.h"
#include "ragd/retrieval/embedder.h"
#include "ragd/retrieval/reranker.h"

namespace ragd::retrieval {
namespace {

using namespace ragd::encoder_testing;

std::vector<std::string> parity_texts() {
  std::string longtext;
  for (int i = 0; i < 300; ++i) longtext += "Über-long passage about the retrieval index, part " + std::to_string(i) + ". ";
  return {"how do I reset my password?",
          "Crème brûlée, jalapeño, São Paulo, Zürich — déjà vu.",
          "日本語の文章と中文句子 mixed with English",
          "antidisestablishmentarianism " + std::string(130, 'z') + " floccinaucinihilipilification",
          longtext};
}

// Runs the reference over texts with `prefix`: max |delta| against `got` (nullopt: skipped).
std::optional<double> reference_delta(const std::filesystem::path& dir, const std::vector<std::string>& texts,
                                      const std::vector<float>& got, const std::string& prefix) {
  std::string list = "[";
  for (size_t i = 0; i < texts.size(); ++i) list += (i ? "," : "") + json_quote(texts[i]);
  write_file(dir / "texts.json", list + "]");
  write_file(dir / "prefix.txt", prefix);
  return reference_max_delta("embed " + quote_arg(dir) + " " + quote_arg(dir / "texts.json") + " " +
                                 quote_arg(dir / "ref.bin") + " \"$(cat " + quote_arg(dir / "prefix.txt") + ")\"",
                             dir / "ref.bin", got);
}

void parity(const std::string& preset, const std::string& pooling, engine::DType dtype, double tol) {
  auto dir = temp_dir("emb_" + preset + "_" + pooling);
  engine::EncoderDirOptions o;
  o.config = *engine::bert_preset_config(preset);
  o.pooling = pooling;
  o.dtype = dtype;
  o.seed = 3;
  ASSERT_TRUE(engine::write_random_encoder_dir(dir.string(), o).ok());
  EmbedderOptions eo;
  eo.name = "model";  // detects the encoder from config.json
  eo.model_dir = dir.string();
  eo.query_prefix = "Represent this sentence for searching relevant passages: ";
  auto emb = make_embedder(eo, nullptr);
  ASSERT_TRUE(emb.ok()) << emb.status().to_string();
  EXPECT_EQ((*emb)->dim(), o.config.hidden_size);
  EXPECT_NE((*emb)->identity().find("pool=" + pooling), std::string::npos) << (*emb)->identity();
  auto texts = parity_texts();
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float> docs, queries;
  ASSERT_TRUE((*emb)->embed(views, &docs).ok());
  ASSERT_TRUE((*emb)->embed_queries(views, &queries).ok());
  EXPECT_NE(docs, queries);  // the query prefix changes the input
  const std::optional<double> docs_delta = reference_delta(dir, texts, docs, "");
  if (!docs_delta) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "python3-torch not installed: no PyTorch reference";
  }
  const double d_docs = *docs_delta;
  const double d_queries = reference_delta(dir, texts, queries, eo.query_prefix).value_or(std::numeric_limits<double>::infinity());
  std::printf("parity %s pool=%s (%s weights): max |delta| documents %.3g, queries (prefixed) %.3g; %zu texts, "
              "the last truncated at max_seq_length\n",
              preset.c_str(), pooling.c_str(), std::string(engine::dtype_name(dtype)).c_str(), d_docs, d_queries,
              texts.size());
  EXPECT_LT(d_docs, tol);
  EXPECT_LT(d_queries, tol);
  std::filesystem::remove_all(dir);
}

TEST(EncoderEmbedder, ParityBgeSmallCls) { parity("bge-small", "cls", engine::DType::kF32, 1e-4); }
TEST(EncoderEmbedder, ParityBgeSmallBf16Weights) { parity("bge-small", "cls", engine::DType::kBF16, 1e-4); }
TEST(EncoderEmbedder, ParityBgeBaseCls) { parity("bge-base", "cls", engine::DType::kF32, 1e-4); }
TEST(EncoderEmbedder, ParityTinyMean) { parity("bert-tiny", "mean", engine::DType::kF32, 1e-5); }
TEST(EncoderEmbedder, ParityTinyLastToken) { parity("bert-tiny", "lasttoken", engine::DType::kF32, 1e-5); }

TEST(EncoderEmbedder, IdentityAndBatching) {
  auto dir = temp_dir("emb_ident");
  engine::EncoderDirOptions o;
  o.config = *engine::bert_preset_config("bert-tiny");
  ASSERT_TRUE(engine::write_random_encoder_dir(dir.string(), o).ok());
  EmbedderOptions eo;
  eo.name = "encoder";
  eo.model_dir = dir.string();
  auto a = make_encoder_embedder(eo);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  eo.query_prefix = "query: ";
  auto b = make_encoder_embedder(eo);
  eo.query_prefix.clear();
  eo.pooling = "mean";
  auto c = make_encoder_embedder(eo);
  ASSERT_TRUE(b.ok() && c.ok());
  EXPECT_NE((*a)->identity(), (*b)->identity());
  EXPECT_NE((*a)->identity(), (*c)->identity());
  EXPECT_EQ((*a)->identity().rfind("encoder/", 0), 0u);
  // Batch size does not change the vectors.
  eo.pooling.clear();
  eo.batch_size = 2;
  auto small = make_encoder_embedder(eo);
  ASSERT_TRUE(small.ok());
  std::vector<std::string_view> texts = {"one", "two words", "three little words", "", "five"};
  std::vector<float> x, y;
  ASSERT_TRUE((*a)->embed(texts, &x).ok());
  ASSERT_TRUE((*small)->embed(texts, &y).ok());
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], 1e-5);
  // Rows are unit length (the empty text is [CLS] [SEP]).
  for (size_t r = 0; r < texts.size(); ++r) {
    double n = 0;
    for (int k = 0; k < (*a)->dim(); ++k) n += double(x[r * (*a)->dim() + k]) * x[r * (*a)->dim() + k];
    EXPECT_NEAR(n, 1.0, 1e-5);
  }
  std::filesystem::remove_all(dir);
}

TEST(EncoderEmbedder, CorpusRemembersPrefixesAndPooling) {
  // A corpus built with an instruction prefix and a pooling override reopens without repeating
  // them; a different explicit prefix is refused by the identity check.
  auto model = temp_dir("emb_corpus_model");
  auto data = temp_dir("emb_corpus_data");
  engine::EncoderDirOptions o;
  o.config = *engine::bert_preset_config("bert-tiny");
  ASSERT_TRUE(engine::write_random_encoder_dir(model.string(), o).ok());
  auto tok = engine::WordPieceTokenizer::from_file_wordpiece((model / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok());
  std::shared_ptr<const engine::Tokenizer> shared(std::move(*tok));
  CorpusOptions co;
  co.embedder.name = "model";
  co.embedder.model_dir = model.string();
  co.embedder.query_prefix = "query: ";
  co.embedder.document_prefix = "passage: ";
  co.embedder.pooling = "mean";
  co.embedder.max_tokens = 48;
  std::string built;
  std::vector<Hit> first;
  {
    auto c = Corpus::open(data.string(), co, shared);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    std::vector<Document> docs(3);
    const char* texts[] = {"the retrieval index answers questions about documents",
                           "a garden of roses and tulips in the spring", "cooking pasta with tomatoes and basil"};
    for (int i = 0; i < 3; ++i) {
      docs[i].id = std::string(1, static_cast<char>('a' + i));
      docs[i].text = texts[i];
    }
    ASSERT_TRUE((*c)->ingest(docs).ok());
    built = (*c)->stats().embedder;
    auto h = (*c)->search("which index answers questions", 3, ReadScope::shared_only());
    ASSERT_TRUE(h.ok());
    first = *h;
  }
  CorpusOptions plain;  // the corpus's own embedder, nothing repeated
  {
    auto c = Corpus::open(data.string(), plain, shared);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ((*c)->stats().embedder, built);
    auto h = (*c)->search("which index answers questions", 3, ReadScope::shared_only());
    ASSERT_TRUE(h.ok());
    ASSERT_EQ(h->size(), first.size());
    for (size_t i = 0; i < first.size(); ++i) {
      EXPECT_EQ((*h)[i].chunk.id, first[i].chunk.id);
      EXPECT_FLOAT_EQ((*h)[i].score, first[i].score) << "the same query prefix is applied";
    }
  }
  CorpusOptions other = co;
  other.embedder.query_prefix = "search: ";
  auto c = Corpus::open(data.string(), other, shared);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("corpus was built with embedder"), std::string::npos) << c.status().to_string();
  std::filesystem::remove_all(model);
  std::filesystem::remove_all(data);
}

TEST(EncoderEmbedder, BadCheckpointsNameTheFile) {
  auto dir = temp_dir("emb_bad");
  engine::EncoderDirOptions o;
  o.config = *engine::bert_preset_config("bert-tiny");
  ASSERT_TRUE(engine::write_random_encoder_dir(dir.string(), o).ok());
  EmbedderOptions eo;
  eo.name = "model";
  eo.model_dir = dir.string();
  // Missing pooling files.
  std::filesystem::rename(dir / "modules.json", dir / "modules.json.off");
  auto r = make_embedder(eo, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("modules.json"), std::string::npos) << r.status().message();
  std::filesystem::rename(dir / "modules.json.off", dir / "modules.json");
  std::filesystem::remove(dir / "1_Pooling" / "config.json");
  r = make_embedder(eo, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("1_Pooling/config.json"), std::string::npos) << r.status().message();
  // Vocabulary without [UNK].
  ASSERT_TRUE(engine::write_random_encoder_dir(dir.string(), o).ok());
  std::string tok = read_file(dir / "tokenizer.json");
  for (size_t p; (p = tok.find("\"[UNK]\"")) != std::string::npos;) tok.replace(p, 7, "\"[UNX]\"");
  tok.replace(tok.find("\"unk_token\": \"[UNX]\""), 20, "\"unk_token\": \"[UNK]\"");
  write_file(dir / "tokenizer.json", tok);
  r = make_embedder(eo, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tokenizer.json"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("[UNK]"), std::string::npos) << r.status().message();
  std::filesystem::remove_all(dir);
}

TEST(CrossEncoder, ScoresMatchReferenceAndBatching) {
  auto dir = temp_dir("xenc");
  engine::EncoderDirOptions o;
  o.config = *engine::bert_preset_config("bert-tiny");
  o.config.architecture = "BertForSequenceClassification";
  o.config.num_labels = 1;
  o.seed = 9;
  ASSERT_TRUE(engine::write_random_encoder_dir(dir.string(), o).ok());
  auto r = CrossEncoderReranker::load(dir.string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  CrossEncoderOptions one;
  one.batch_size = 1;
  auto r1 = CrossEncoderReranker::load(dir.string(), one);
  ASSERT_TRUE(r1.ok());
  auto texts = parity_texts();
  std::vector<std::string_view> views(texts.begin(), texts.end());
  const std::string query = "which passage talks about the retrieval index?";
  std::vector<float> s, s1;
  ASSERT_TRUE((*r)->score(query, views, &s).ok());
  ASSERT_TRUE((*r1)->score(query, views, &s1).ok());
  ASSERT_EQ(s.size(), texts.size());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], s1[i], 1e-5);
  std::string list = "[";
  for (size_t i = 0; i < texts.size(); ++i)
    list += (i ? "," : "") + std::string("[") + json_quote(query) + "," + json_quote(texts[i]) + "]";
  write_file(dir / "pairs.json", list + "]");
  const std::optional<double> m = reference_max_delta(
      "score " + quote_arg(dir) + " " + quote_arg(dir / "pairs.json") + " " + quote_arg(dir / "ref.bin"),
      dir / "ref.bin", s);
  if (m) {
    std::printf("cross-encoder bert-tiny: max |delta score| = %.3g over %zu pairs (one truncated)\n", *m, s.size());
    EXPECT_LT(*m, 1e-5);
  }
  // An embedding checkpoint is not a cross-encoder: the error names config.json.
  auto emb_dir = temp_dir("xenc_emb");
  engine::EncoderDirOptions e;
  e.config = *engine::bert_preset_config("bert-tiny");
  ASSERT_TRUE(engine::write_random_encoder_dir(emb_dir.string(), e).ok());
  auto bad = CrossEncoderReranker::load(emb_dir.string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("config.json"), std::string::npos) << bad.status().message();
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(emb_dir);
}

}  // namespace
}  // namespace ragd::retrieval
