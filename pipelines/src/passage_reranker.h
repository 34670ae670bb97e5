// The reranking stage of a one-shot run ([retriever] rerank > 0): reorders the retrieved passages
// best first and keeps the best `keep`. Two implementations:
//   Reranker           (reranker.h)            the generator scores log P(question | passage) (UPR);
//   CrossEncoderStage  (cross_encoder_stage.h) a cross-encoder checkpoint ([retriever] rerank_model).
// The executor holds one per kind and picks by the pipeline's rerank_model.
// Thread-safety: implementations are thread-safe (the retrieval threads call them concurrently).
#pragma once

#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "context_doc.h"

namespace ragd::pipelines {

class PassageReranker {
 public:
  virtual ~PassageReranker() = default;
  // Reorders `docs` (retrieval order) by score, best first (ties keep the retriever's order), and
  // keeps the best `keep` of them (-1: spec.rerank). `scope`: the run's KV scope.
  virtual Status keep_best(const PipelineSpec& spec, const std::string& question, const std::string& scope,
                           std::vector<ContextDoc>* docs, int keep = -1) = 0;
};

// What keep_best does once the passages are scored (one score per passage of `docs`): reorders
// them best first (ties in their current order) and keeps the first `keep`.
void keep_best_scored(const std::vector<double>& scores, int keep, std::vector<ContextDoc>* docs);

}  // namespace ragd::pipelines
