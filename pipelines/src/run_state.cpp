#include "run_state.h"

#include <algorithm>

#include "extractive.h"
#include "ragd/common/check.h"
#include "ragd/common/log.h"

namespace ragd::pipelines {

RunState::RunState(std::vector<int32_t> prompt, const engine::SamplingParams& sampling, const engine::Tokenizer& tok,
                   std::vector<int32_t> stop_ids, int max_new_tokens)
    : tokens_(std::move(prompt)),
      prompt_len_(static_cast<int>(tokens_.size())),
      max_new_(max_new_tokens),
      stop_strings_(sampling.stop),
      stop_ids_(std::move(stop_ids)),
      sampler_(sampling),
      decoder_(std::in_place, tok),
      tok_(&tok) {}

int32_t RunState::advance(std::span<const float> logits) { return accept(sample(logits)); }

bool RunState::greedy_pick_suffices() const {
  const engine::SamplingParams& p = sampler_.params();
  return !extractive_ && !constraint_ && top_logprobs_ == 0 && p.temperature == 0.0f && !p.has_penalties();
}

namespace {

// The n likeliest tokens of a logits row, best first (ties: lower id), with their log-softmax.
std::vector<TokenLogprob> likeliest(std::span<const float> logits, int n, const engine::Tokenizer& tok) {
  auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  std::vector<int32_t> heap;  // the best n so far; heap front = the worst of them
  heap.reserve(static_cast<size_t>(n) + 1);
  for (int32_t i = 0; i < static_cast<int32_t>(logits.size()); ++i) {
    if (static_cast<int>(heap.size()) == n && !better(i, heap.front())) continue;
    heap.push_back(i);
    std::push_heap(heap.begin(), heap.end(), better);
    if (static_cast<int>(heap.size()) > n) {
      std::pop_heap(heap.begin(), heap.end(), better);
      heap.pop_back();
    }
  }
  std::sort_heap(heap.begin(), heap.end(), better);
  std::vector<TokenLogprob> out;
  if (heap.empty()) return out;
  const float lse = logits[heap.front()] - engine::log_softmax_at(logits, heap.front());
  for (int32_t id : heap) out.push_back({id, tok.token_bytes(id), logits[id] - lse});
  return out;
}

}  // namespace

engine::SampleResult RunState::sample(std::span<const float> logits) {
  RAGD_CHECK(finish_reason_.empty()) << "sample() after the run finished (" << finish_reason_ << ")";
  if (top_logprobs_ > 0) top_ = likeliest(logits, top_logprobs_, *tok_);
  if (extractive_) {
    masked_.assign(logits.begin(), logits.end());
    mask_to_prompt_spans(std::span<const int32_t>(tokens_).first(static_cast<size_t>(prompt_len_)), generated_tokens(),
                         stop_ids_, masked_);
    logits = masked_;
  }
  if (constraint_) {
    const engine::TokenMask m = constraint_->mask();
    return sampler_.sample(logits, tokens_, &m);
  }
  return sampler_.sample(logits, tokens_);
}

void RunState::set_constraint(std::shared_ptr<const engine::CompiledConstraint> c) {
  RAGD_CHECK(generated() == 0) << "set_constraint() after " << generated() << " generated tokens";
  if (c) constraint_.emplace(std::move(c), stop_ids_);
  else constraint_.reset();
}

int32_t RunState::accept(const engine::SampleResult& s) {
  RAGD_CHECK(finish_reason_.empty()) << "accept() after the run finished (" << finish_reason_ << ")";
  tokens_.push_back(s.token);
  const bool is_stop_id = std::find(stop_ids_.begin(), stop_ids_.end(), s.token) != stop_ids_.end();
  std::string text = is_stop_id ? std::string() : decoder_->push(s.token);
  if (is_stop_id) finish_reason_ = "stop";
  if (constraint_ && !is_stop_id) {
    if (!constraint_->accept(s.token)) {
      // Only when the mask allowed no id of the logits row (a tokenizer with more ids than the
      // model's rows): the run ends rather than write outside the constraint.
      log::pipelines()->error("token {} is outside the constraint's mask; the constrained run ends", s.token);
      finish_reason_ = "stop";
    } else if (constraint_->complete()) {
      finish_reason_ = "stop";  // nothing can follow a complete value
    }
  }
  if (!text.empty() && !stop_strings_.empty()) {
    const size_t before = out_text_.size();
    out_text_ += text;
    for (const auto& stop : stop_strings_) {
      if (stop.empty()) continue;
      const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
      const size_t pos = out_text_.find(stop, from);
      if (pos != std::string::npos) {
        text = pos > before ? out_text_.substr(before, pos - before) : std::string();
        out_text_.resize(pos);
        finish_reason_ = "stop";
        break;
      }
    }
  }
  if (finish_reason_.empty() && generated() >= max_new_) finish_reason_ = "length";
  RunEvent ev;
  ev.kind = RunEvent::Kind::kToken;
  ev.index = generated() - 1;
  ev.token_id = s.token;
  ev.text = std::move(text);
  ev.logprob = s.logprob;
  ev.top_logprobs = std::move(top_);
  top_.clear();
  events_.push_back(std::move(ev));
  if (auto_commit_) committed_ = events_.size();
  return s.token;
}

void RunState::set_auto_commit(bool on) {
  auto_commit_ = on;
  if (on) committed_ = events_.size();
}

void RunState::commit() { committed_ = events_.size(); }

void RunState::commit_to(size_t n) { committed_ = std::max(committed_, std::min(n, events_.size())); }

void RunState::replace_prompt(std::vector<int32_t> prompt) {
  std::vector<int32_t> gen(tokens_.begin() + prompt_len_, tokens_.end());
  tokens_ = std::move(prompt);
  prompt_len_ = static_cast<int>(tokens_.size());
  tokens_.insert(tokens_.end(), gen.begin(), gen.end());
}

void RunState::push_event(RunEvent ev) {
  events_.push_back(std::move(ev));
  if (auto_commit_) committed_ = events_.size();
}

RunState::Checkpoint RunState::checkpoint() const {
  return Checkpoint{tokens_.size(), generated(), sampler_, *decoder_, out_text_, finish_reason_, events_.size(),
                    constraint_ ? constraint_->num_accepted() : 0};
}

void RunState::restore(const Checkpoint& cp) {
  RAGD_CHECK(cp.events >= committed_) << "restore to a checkpoint of " << cp.events << " tokens behind the "
                                      << committed_ << " committed ones";
  RAGD_CHECK(cp.generated <= generated()) << "restore to a checkpoint from another run";
  tokens_.resize(static_cast<size_t>(prompt_len_ + cp.generated));
  sampler_ = cp.sampler;
  decoder_.emplace(cp.decoder);
  out_text_ = cp.out_text;
  finish_reason_ = cp.finish_reason;
  events_.resize(cp.events);
  if (constraint_) constraint_->rollback(cp.constraint_tokens);
}

bool RunState::release(const EventSink& sink) {
  while (sent_ < committed_) {
    const RunEvent& ev = events_[sent_++];
    bool keep = false;
    try {
      keep = sink(ev);
    } catch (...) {
      keep = false;  // a throwing sink counts as a client that went away
    }
    if (!keep) return false;
  }
  return true;
}

}  // namespace ragd::pipelines
