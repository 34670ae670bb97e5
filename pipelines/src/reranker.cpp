#include "reranker.h"

#include <algorithm>
#include <cmath>

namespace ragd::pipelines {

Reranker::Reranker(std::unique_ptr<engine::Model> model, const engine::Tokenizer& tok)
    : model_(std::move(model)), prompts_(tok, model_->config()) {}

Result<std::vector<double>> Reranker::score(const PipelineSpec& spec, std::span<const std::vector<int32_t>> docs,
                                            const std::string& question) {
  if (question.empty()) return Status::InvalidArgument("rerank: empty question");
  std::vector<double> out(docs.size(), 0.0);
  if (docs.empty()) return out;
  // The question's tokens inside the prompt's last segment: what a prompt without the question
  // lacks (the segment is question prefix + question + template suffix, tokenized at once).
  std::vector<std::vector<int32_t>> seqs(docs.size());
  std::vector<int> q0(docs.size()), q1(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::span<const std::vector<int32_t>> one(&docs[i], 1);
    const PromptSegments with = prompts_.build_rag(spec, one, question);
    const PromptSegments without = prompts_.build_rag(spec, one, "");
    const std::vector<int32_t>& a = with.segs.back();
    const std::vector<int32_t>& b = without.segs.back();
    size_t p = 0;
    while (p < a.size() && p < b.size() && a[p] == b[p]) ++p;
    size_t s = 0;
    while (s < a.size() - p && s < b.size() - p && a[a.size() - 1 - s] == b[b.size() - 1 - s]) ++s;
    if (p + s >= a.size()) return Status::Internal("rerank: the question left no tokens in the prompt");
    std::vector<int32_t>& seq = seqs[i];
    for (size_t j = 0; j + 1 < with.segs.size(); ++j) seq.insert(seq.end(), with.segs[j].begin(), with.segs[j].end());
    q0[i] = static_cast<int>(seq.size() + p);
    seq.insert(seq.end(), a.begin(), a.end() - static_cast<std::ptrdiff_t>(s));
    q1[i] = static_cast<int>(seq.size());
    if (q0[i] == 0) return Status::Internal("rerank: the question starts the prompt");
  }
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<engine::BlockTable> tables(docs.size());
  std::vector<engine::SeqStep> steps;
  for (size_t i = 0; i < docs.size(); ++i)
    steps.push_back(engine::SeqStep{&tables[i], seqs[i], engine::SeqStep::Logits::kAll});
  engine::StepOutput o;
  const Status st = model_->forward(steps, &o);
  for (auto& t : tables) t.release(model_->kv_pool());
  RAGD_RETURN_IF_ERROR(st);
  for (size_t i = 0; i < docs.size(); ++i) {
    double total = 0.0;
    for (int t = q0[i]; t < q1[i]; ++t) {  // row t - 1 predicts token t
      const auto row = o.row(o.row_begin[i] + t - 1);
      const float mx = *std::max_element(row.begin(), row.end());
      double z = 0.0;
      for (float v : row) z += std::exp(static_cast<double>(v) - mx);
      total += static_cast<double>(row[seqs[i][t]]) - mx - std::log(z);
    }
    out[i] = total;
  }
  return out;
}

}  // namespace ragd::pipelines
