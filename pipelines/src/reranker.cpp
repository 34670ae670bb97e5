#include "reranker.h"

#include <algorithm>

#include "ragd/engine/sampler.h"

namespace ragd::pipelines {

// Cached prompt heads at most (the pool usually fills first; this bounds the lookup).
constexpr size_t kMaxHeads = 512;

Reranker::Reranker(std::unique_ptr<engine::Model> model, const engine::Tokenizer& tok)
    : model_(std::move(model)), prompts_(tok, model_->config()) {}

Reranker::~Reranker() {
  for (auto& h : heads_) h->table.release(model_->kv_pool());
}

Result<std::vector<double>> Reranker::score(const PipelineSpec& spec, std::span<const std::vector<int32_t>> docs,
                                            const std::string& question, const std::string& scope) {
  if (question.empty()) return Status::InvalidArgument("rerank: empty question");
  std::vector<double> out(docs.size(), 0.0);
  if (docs.empty()) return out;
  // The question's tokens inside the prompt's last segment, the same for every passage (segments
  // are tokenized on their own): what a prompt without the question lacks (the segment is question
  // prefix + question + template suffix, tokenized at once).
  const std::span<const std::vector<int32_t>> first(docs.data(), 1);
  const std::vector<int32_t> a = prompts_.build_rag(spec, first, question).segs.back();
  const std::vector<int32_t> b = prompts_.build_rag(spec, first, "").segs.back();
  size_t p = 0;
  while (p < a.size() && p < b.size() && a[p] == b[p]) ++p;
  size_t s = 0;
  while (s < a.size() - p && s < b.size() - p && a[a.size() - 1 - s] == b[b.size() - 1 - s]) ++s;
  if (p + s >= a.size()) return Status::Internal("rerank: the question left no tokens in the prompt");
  if (p == 0) return Status::Internal("rerank: the question starts its prompt segment");
  const std::vector<int32_t> tail(a.begin(), a.end() - static_cast<std::ptrdiff_t>(s));  // question prefix + question
  const int q0 = static_cast<int>(p);
  // Each passage's prompt head: every segment before the question's.
  std::vector<std::vector<int32_t>> heads(docs.size());
  for (size_t i = 0; i < docs.size(); ++i) {
    const PromptSegments segs = prompts_.build_rag(spec, std::span<const std::vector<int32_t>>(&docs[i], 1), question);
    for (size_t j = 0; j + 1 < segs.segs.size(); ++j) heads[i].insert(heads[i].end(), segs.segs[j].begin(), segs.segs[j].end());
  }
  std::lock_guard<std::mutex> lk(mu_);
  engine::KvPool& pool = model_->kv_pool();
  for (size_t i = 0; i < docs.size(); ++i) {
    RAGD_ASSIGN_OR_RETURN(Head * h, head(scope, heads[i]));
    // The head's KV shared, the tail prefilled: row t of the tail predicts tail token t + 1.
    engine::BlockTable t = h->table.fork_prefix(pool, static_cast<int>(h->tokens.size()));
    engine::SeqStep step{&t, tail, engine::SeqStep::Logits::kAll};
    engine::StepOutput o;
    Status st = model_->forward({&step, 1}, &o);
    if (!st.ok() && st.code() == StatusCode::kResourceExhausted && heads_.size() > 1) {
      t.release(pool);  // the pool is full: keep only this head and try once more
      while (heads_.size() > 1) evict_oldest();
      t = h->table.fork_prefix(pool, static_cast<int>(h->tokens.size()));
      st = model_->forward({&step, 1}, &o);
    }
    t.release(pool);
    RAGD_RETURN_IF_ERROR(st);
    double total = 0.0;
    for (int k = q0; k < static_cast<int>(tail.size()); ++k) total += engine::log_softmax_at(o.row(k - 1), tail[k]);
    out[i] = total;
  }
  return out;
}

Status Reranker::keep_best(const PipelineSpec& spec, const std::string& question, const std::string& scope,
                           std::vector<ContextDoc>* docs, int keep) {
  if (keep < 0) keep = spec.rerank;
  std::vector<std::vector<int32_t>> toks;
  for (const auto& d : *docs) toks.push_back(d.tokens);
  RAGD_ASSIGN_OR_RETURN(const std::vector<double> score, this->score(spec, toks, question, scope));
  keep_best_scored(score, keep, docs);
  return Status::OK();
}

Reranker::Stats Reranker::stats() const {
  std::lock_guard<std::mutex> lk(mu_);
  return stats_;
}

Result<Reranker::Head*> Reranker::head(const std::string& scope, const std::vector<int32_t>& tokens) {
  for (auto& h : heads_) {
    if (h->scope == scope && h->tokens == tokens) {
      h->last_use = ++clock_;
      ++stats_.head_hits;
      return h.get();
    }
  }
  ++stats_.head_misses;
  auto h = std::make_unique<Head>();
  h->scope = scope;
  h->tokens = tokens;
  h->last_use = ++clock_;
  engine::KvPool& pool = model_->kv_pool();
  for (;;) {
    engine::SeqStep step{&h->table, h->tokens, engine::SeqStep::Logits::kNone};
    engine::StepOutput o;
    const Status st = model_->forward({&step, 1}, &o);
    if (st.ok()) break;
    h->table.release(pool);
    if (st.code() != StatusCode::kResourceExhausted || heads_.empty()) return st;
    evict_oldest();  // the pool is full: make room and prefill again
  }
  if (heads_.size() >= kMaxHeads) evict_oldest();
  heads_.push_back(std::move(h));
  return heads_.back().get();
}

void Reranker::evict_oldest() {
  auto it = std::min_element(heads_.begin(), heads_.end(),
                             [](const auto& a, const auto& b) { return a->last_use < b->last_use; });
  (*it)->table.release(model_->kv_pool());
  heads_.erase(it);
  ++stats_.evictions;
}

}  // namespace ragd::pipelines
