#include "cross_encoder_stage.h"

namespace ragd::pipelines {

Status CrossEncoderStage::keep_best(const PipelineSpec& spec, const std::string& question, const std::string& /*scope*/,
                                    std::vector<ContextDoc>* docs, int keep) {
  if (keep < 0) keep = spec.rerank;
  if (question.empty()) return Status::InvalidArgument("rerank: empty question");
  std::vector<std::string> texts;
  texts.reserve(docs->size());
  for (const auto& d : *docs) texts.push_back(tok_->decode(d.tokens, /*skip_special=*/true));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float> s;
  RAGD_RETURN_IF_ERROR(model_->score(question, views, &s));
  keep_best_scored(std::vector<double>(s.begin(), s.end()), keep, docs);
  return Status::OK();
}

}  // namespace ragd::pipelines
