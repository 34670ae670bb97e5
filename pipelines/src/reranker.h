// Reranking retrieved passages with a language model: a passage's score is log P(question |
// passage), the log-probability of the question's tokens after a one-passage RAG prompt of the
// pipeline (system prefix, context header, the passage, the question prefix), as in UPR (Sachan et
// al., 2022, "Improving Passage Retrieval with Zero-Shot Question Generation"). A model that reads
// passages well knows which one a question is about: on the QA set the committed model puts the
// gold passage first for every question whose passage was retrieved (docs/benchmarks.md).
//
// The reranker holds its own copy of the model (the serving model belongs to the scheduler thread;
// this one serves the retrieval threads), so it is meant for models small enough to keep twice.
// The KV of a one-passage prompt's head (system prefix, context header, passage) is kept in that
// copy's pool, least recently used first out: a passage scored again only prefills the question.
// Heads are keyed by the run's KV scope as well as their tokens, like every other KV cache: a
// tenant never reuses (nor times) a head another tenant computed, even for the same text.
// Thread-safety: thread-safe (one mutex around the model).
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/prompt_builder.h"
#include "passage_reranker.h"
#include "context_doc.h"

namespace ragd::pipelines {

class Reranker final : public PassageReranker {
 public:
  // `model`: the copy it scores with; its tokenizer is the one the passages' tokens come from.
  Reranker(std::unique_ptr<engine::Model> model, const engine::Tokenizer& tok);
  ~Reranker();

  // One score per passage (token ids as laid out in the prompt), higher = more likely the one the
  // question is about. InvalidArgument for an empty question; errors of the model pass through.
  // `scope`: the run's KV scope, tenant and cache_salt (kvstore::kv_scope, as the KvStore keys take it).
  Result<std::vector<double>> score(const PipelineSpec& spec, std::span<const std::vector<int32_t>> docs,
                                    const std::string& question, const std::string& scope);

  // The reranking stage of a one-shot run: reorders `docs` (retrieval order) by score, best
  // first (ties keep the retriever's order), and keeps the best `keep` of them (-1: spec.rerank).
  Status keep_best(const PipelineSpec& spec, const std::string& question, const std::string& scope,
                   std::vector<ContextDoc>* docs, int keep = -1) override;

  struct Stats {
    uint64_t head_hits = 0, head_misses = 0;  // heads found in the cache / prefilled
    uint64_t evictions = 0;
  };
  Stats stats() const;

 private:
  struct Head {  // a cached prompt head: its scope and tokens (the key) and KV
    std::string scope;
    std::vector<int32_t> tokens;
    engine::BlockTable table;
    uint64_t last_use = 0;
  };
  // The cached head for `tokens`, prefilled when missing (evicting least recently used heads when
  // the pool is full). Under mu_.
  Result<Head*> head(const std::string& scope, const std::vector<int32_t>& tokens);
  void evict_oldest();

  mutable std::mutex mu_;
  Stats stats_;  // guarded by mu_
  std::unique_ptr<engine::Model> model_;
  PromptBuilder prompts_;
  std::vector<std::unique_ptr<Head>> heads_;
  uint64_t clock_ = 0;
};

}  // namespace ragd::pipelines
