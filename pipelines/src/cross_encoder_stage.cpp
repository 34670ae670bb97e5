#include "cross_encoder_stage.h"

#include <algorithm>
#include <numeric>

namespace ragd::pipelines {

std::vector<size_t> best_first(const std::vector<double>& scores) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  return order;
}

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
  const std::vector<size_t> order = best_first(std::vector<double>(s.begin(), s.end()));
  std::vector<ContextDoc> kept;
  for (size_t i = 0; i < order.size() && static_cast<int>(kept.size()) < keep; ++i)
    kept.push_back(std::move((*docs)[order[i]]));
  *docs = std::move(kept);
  return Status::OK();
}

}  // namespace ragd::pipelines
