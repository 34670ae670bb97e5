#include "model_drafter.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "ragd/common/log.h"

namespace ragd::pipelines {

namespace {

// Text whose ids two tokenizers must agree on to share drafts: words, digits, punctuation and
// the chat template's special tokens.
constexpr const char* kProbeText =
    "Quote the passage about the glacier at Tozirby. In 1876, the discharge peaked at 366 cubic metres "
    "per second; the records say: \"It retreated.\" <|begin_of_text|><|start_header_id|>user<|end_header_id|>"
    "<|eot_id|><|im_start|><|im_end|>";

}  // namespace

Result<std::unique_ptr<ModelDrafter>> ModelDrafter::open(const std::string& dir, const engine::ModelOptions& target_opts,
                                                         const engine::ModelConfig& target_cfg,
                                                         const engine::Tokenizer& target_tok) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty()) return Status::InvalidArgument("draft_model: no directory given");
  if (!fs::is_regular_file(fs::path(dir) / "config.json", ec))
    return Status::InvalidArgument("draft_model '" + dir + "': not a model directory (no config.json)");
  engine::ModelOptions o = target_opts;
  auto probe = engine::Model::load(dir, [&] {
    engine::ModelOptions small = o;
    small.kv_pool_bytes = 1 << 20;  // shapes first; the pool is sized below
    return small;
  }());
  if (!probe.ok()) return probe.status().with_context("draft_model '" + dir + "'");
  const engine::ModelConfig& dc = (*probe)->config();
  if (dc.vocab_size != target_cfg.vocab_size)
    return Status::InvalidArgument("draft_model '" + dir + "': vocabulary of " + std::to_string(dc.vocab_size) +
                                   " ids, the serving model's has " + std::to_string(target_cfg.vocab_size) +
                                   " (a draft model must share the serving model's tokenizer)");
  const fs::path tok_path = fs::path(dir) / "tokenizer.json";
  if (fs::is_regular_file(tok_path, ec)) {
    auto tok = engine::Tokenizer::from_file(tok_path.string());
    if (!tok.ok()) return tok.status().with_context("draft_model '" + dir + "'");
    if ((*tok)->vocab_size() != target_tok.vocab_size() ||
        (*tok)->encode(kProbeText, false, true) != target_tok.encode(kProbeText, false, true))
      return Status::InvalidArgument("draft_model '" + dir + "': its tokenizer.json is not the serving model's "
                                     "(a draft model must share the serving model's tokenizer)");
  }
  // A pool that holds as many tokens as the serving model's: bytes scale with layers x KV width.
  const double target_width = static_cast<double>(target_cfg.num_hidden_layers) * target_cfg.num_key_value_heads *
                              target_cfg.head_dim;
  const double draft_width = static_cast<double>(dc.num_hidden_layers) * dc.num_key_value_heads * dc.head_dim;
  o.kv_pool_bytes = std::max<size_t>(4u << 20, static_cast<size_t>(static_cast<double>(target_opts.kv_pool_bytes) *
                                                                     draft_width / std::max(1.0, target_width)));
  probe->reset();
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<engine::Model> m, engine::Model::load(dir, o));
  return std::make_unique<ModelDrafter>(std::move(m), dir);
}

ModelDrafter::ModelDrafter(std::unique_ptr<engine::Model> model, std::string dir)
    : model_(std::move(model)), dir_(std::move(dir)) {
  calibrate();
}

void ModelDrafter::calibrate() {
  using Clock = std::chrono::steady_clock;
  constexpr int kPrompt = 128, kChain = 4;
  const int vocab = model_->config().vocab_size;
  const engine::KvPool& pool = model_->kv_pool();
  if (vocab <= 0 || pool.free_blocks() * static_cast<size_t>(pool.layout().block_size) < static_cast<size_t>(2 * (kPrompt + kChain)))
    return;
  std::vector<int32_t> prompt(kPrompt);
  for (int i = 0; i < kPrompt; ++i) prompt[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + 3) % vocab);
  double prefill = 0, chain = 0;
  for (int pass = 0; pass < 2; ++pass) {  // the first pass warms the engine up (threads, buffers)
    engine::BlockTable t;
    engine::StepOutput out;
    engine::SeqStep st{&t, prompt, engine::SeqStep::Logits::kGreedy};
    auto t0 = Clock::now();
    bool ok = model_->forward({&st, 1}, &out).ok();
    prefill = std::chrono::duration<double>(Clock::now() - t0).count();
    t0 = Clock::now();
    for (int j = 0; ok && j < kChain; ++j) {
      const int32_t next = out.picks[0].token;
      st.tokens = std::span<const int32_t>(&next, 1);
      ok = model_->forward({&st, 1}, &out).ok();
    }
    chain = std::chrono::duration<double>(Clock::now() - t0).count();
    t.release(model_->kv_pool());
    if (!ok) return;
  }
  feed_token_s_ = prefill / kPrompt;
  token_s_ = chain / kChain;
}

double ModelDrafter::feed_seconds(uint64_t run, std::span<const int32_t> tokens) const {
  size_t held = 0;
  if (auto it = seqs_.find(run); it != seqs_.end()) {
    const size_t n = std::min(it->second.held.size(), tokens.empty() ? 0 : tokens.size() - 1);
    while (held < n && it->second.held[held] == tokens[held]) ++held;
  }
  const size_t lacking = tokens.size() - held;
  return lacking > kPrefillFeed ? static_cast<double>(lacking) * feed_token_s_ : 0.0;
}

ModelDrafter::~ModelDrafter() {
  for (auto& [run, s] : seqs_) s.table.release(model_->kv_pool());
}

void ModelDrafter::cut(Seq& s, std::span<const int32_t> tokens, size_t limit) {
  size_t keep = 0;
  const size_t n = std::min({s.held.size(), tokens.size(), limit});
  while (keep < n && s.held[keep] == tokens[keep]) ++keep;
  if (keep < s.held.size()) {
    s.table.truncate(model_->kv_pool(), static_cast<int>(keep));
    s.held.resize(keep);
  }
}

void ModelDrafter::settle(uint64_t run, std::span<const int32_t> tokens) {
  auto it = seqs_.find(run);
  if (it != seqs_.end()) cut(it->second, tokens, tokens.size());
}

void ModelDrafter::forget(uint64_t run) {
  auto it = seqs_.find(run);
  if (it == seqs_.end()) return;
  it->second.table.release(model_->kv_pool());
  seqs_.erase(it);
}

bool ModelDrafter::drop_idle(std::span<const Request> keep) {
  bool freed = false;
  for (auto it = seqs_.begin(); it != seqs_.end();) {
    const bool drafting = std::any_of(keep.begin(), keep.end(), [&](const Request& r) { return r.run == it->first; });
    if (drafting || it->second.held.empty()) {
      ++it;
      continue;
    }
    it->second.table.release(model_->kv_pool());
    it = seqs_.erase(it);
    freed = true;
  }
  return freed;
}

void ModelDrafter::draft(std::span<Request> requests) {
  using Clock = std::chrono::steady_clock;
  std::vector<Request*> live;
  for (Request& r : requests) {
    r.out->clear();
    if (r.n > 0 && !r.tokens.empty()) live.push_back(&r);
  }
  if (live.empty()) return;
  // First step: what each run's KV lacks of its tokens (at least the last one: its row gives the
  // first draft token). Later steps: the previous draft token.
  std::vector<Seq*> seqs;
  std::vector<std::span<const int32_t>> feed;
  for (Request* r : live) {
    Seq& s = seqs_[r->run];
    cut(s, r->tokens, r->tokens.size() - 1);
    seqs.push_back(&s);
    feed.push_back(r->tokens.subspan(s.held.size()));
  }
  double chain_seconds = 0, feed_seconds = 0;
  size_t drafted = 0, chain_drafted = 0, fed = 0;
  std::vector<engine::SeqStep> batch;
  std::vector<size_t> member;  // batch row -> index in live
  for (int j = 0;; ++j) {
    batch.clear();
    member.clear();
    bool prefill = false;
    for (size_t i = 0; i < live.size(); ++i) {
      if (j >= live[i]->n || static_cast<int>(live[i]->out->size()) != j) continue;  // done, or stopped early
      engine::SeqStep st;
      st.table = &seqs[i]->table;
      st.tokens = j == 0 ? feed[i] : std::span<const int32_t>(&live[i]->out->back(), 1);
      st.logits = engine::SeqStep::Logits::kGreedy;
      prefill = prefill || st.tokens.size() > kPrefillFeed;
      batch.push_back(st);
      member.push_back(i);
    }
    if (batch.empty()) break;
    engine::StepOutput out;
    const auto t0 = Clock::now();
    Status st = model_->forward(batch, &out);
    if (!st.ok() && st.code() == StatusCode::kResourceExhausted && drop_idle(requests)) st = model_->forward(batch, &out);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!st.ok()) {
      // The step's tables are unchanged (no room) or unspecified (an engine error): drop those
      // runs' draft KV, so that their next draft starts over from their tokens.
      if (st.code() != StatusCode::kResourceExhausted)
        log::pipelines()->warn("draft model {}: step failed: {}", dir_, st.to_string());
      for (size_t b = 0; b < batch.size(); ++b) {
        Seq& s = *seqs[member[b]];
        s.table.release(model_->kv_pool());
        s.held.clear();
      }
      break;
    }
    ++stats_.steps;
    stats_.seconds += dt;
    if (!prefill) chain_seconds += dt;
    if (prefill) {
      feed_seconds += dt;
      for (const engine::SeqStep& b : batch) fed += b.tokens.size();
    }
    for (size_t b = 0; b < batch.size(); ++b) {
      const size_t i = member[b];
      Seq& s = *seqs[i];
      s.held.insert(s.held.end(), batch[b].tokens.begin(), batch[b].tokens.end());
      stats_.fed_tokens += batch[b].tokens.size();
      live[i]->out->push_back(out.picks[b].token);
      ++drafted;
      if (!prefill) ++chain_drafted;
    }
  }
  stats_.tokens += drafted;
  // Per-token cost, as the budget weighs it: steps with a prefill in them are counted as if they
  // had cost what this call's other steps cost per token; their time goes into the per-fed-token
  // cost instead (feed_seconds(): what the gate weighs before a prefill).
  constexpr double kWeight = 0.1;  // moving averages over the last ~10 drafts
  if (chain_drafted > 0) {
    const double per_token = chain_seconds / static_cast<double>(chain_drafted);
    token_s_ = token_s_ == 0 ? per_token : (1 - kWeight) * token_s_ + kWeight * per_token;
  }
  if (fed > 0) {
    const double per_fed = feed_seconds / static_cast<double>(fed);
    feed_token_s_ = feed_token_s_ == 0 ? per_fed : (1 - kWeight) * feed_token_s_ + kWeight * per_fed;
  }
}

ModelDrafter::Stats ModelDrafter::stats() const {
  Stats s = stats_;
  s.pool_blocks = model_->kv_pool().num_blocks();
  s.pool_used_blocks = model_->kv_pool().used_blocks();
  return s;
}

}  // namespace ragd::pipelines
