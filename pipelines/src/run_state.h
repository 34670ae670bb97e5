// RunState: what one run has generated and everything needed to continue it — tokens (prompt, then
// generated), the sampler (parameters and RNG), the stream decoder, the stop-string matcher — with
// checkpoints to roll back to, and an emitter that releases only committed tokens to the client.
//
// advance() samples one token from the step's logits, decodes it and checks the stop conditions;
// the token's event is held until it is committed. With auto-commit (the default: plain serving)
// every token is committed at once. A caller that may roll back (speculative retrieval) turns
// auto-commit off, takes checkpoint()s, and either commit()s or restore()s: after a restore the
// sampler, decoder and stop state are exactly those of the checkpoint, so the same logits give the
// same tokens again, and the rolled-back tokens were never sent. The KV side of a rollback is the
// caller's: truncate the sequence to checkpoint.tokens (Scheduler::truncate).
//
// Iterative RAG changes the prompt under a running generation: replace_prompt() swaps the prompt
// and keeps the generated tokens after it; a checkpoint counts generated tokens, so it restores
// across such a change. Non-token events (a sources event when the context changes) go through the
// same ordered, committed stream (push_event), so a rolled-back context is never sent either.
//
// Thread-safety: not thread-safe; owned by the scheduler thread (which may run sample() of different
// RunStates on other threads at once, see sample()).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ragd/engine/constraint_matcher.h"
#include "ragd/engine/sampler.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/executor.h"

namespace ragd::pipelines {

class RunState {
 public:
  struct Checkpoint {
    size_t tokens = 0;        // sequence length (prompt + generated) when it was taken
    int generated = 0;
    engine::Sampler sampler;  // incl. RNG state
    engine::StreamDecoder decoder;
    std::string out_text;     // decoded text seen by the stop-string matcher
    std::string finish_reason;
    size_t events = 0;        // produced events
    size_t constraint_tokens = 0;  // tokens the constraint matcher had accepted
  };

  // prompt: token ids; stop_ids: ids that end the run (EOS unless ignored, stop_token_ids).
  RunState(std::vector<int32_t> prompt, const engine::SamplingParams& sampling, const engine::Tokenizer& tok,
           std::vector<int32_t> stop_ids, int max_new_tokens);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  int prompt_len() const { return prompt_len_; }
  int generated() const { return static_cast<int>(tokens_.size()) - prompt_len_; }
  int max_new_tokens() const { return max_new_; }
  // "" while running; "stop" | "length" once a stop condition was met.
  const std::string& finish_reason() const { return finish_reason_; }

  // Samples the next token from `logits` (vocabulary row of the last fed token), appends it,
  // decodes it and applies stop ids, stop strings and max_new_tokens. Returns the token.
  // advance(l) is accept(sample(l)): sample() only draws (the extractive mask, this run's sampler and
  // RNG; it touches nothing another RunState holds, so different runs may sample on different
  // threads at once), accept() does the rest.
  int32_t advance(std::span<const float> logits);
  engine::SampleResult sample(std::span<const float> logits);
  int32_t accept(const engine::SampleResult& s);

  // Replaces the prompt; the generated tokens stay and follow it.
  void replace_prompt(std::vector<int32_t> prompt);
  std::span<const int32_t> generated_tokens() const {
    return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(prompt_len_));
  }
  // Appends a non-token event (kSources) to the ordered stream, after the tokens produced so far.
  void push_event(RunEvent ev);
  size_t num_events() const { return events_.size(); }

  // Extractive answers (extractive.h): every later token is sampled under the prompt-span mask.
  void set_extractive(bool on) { extractive_ = on; }
  // Structured output (constraint_matcher.h): every later token is sampled under the constraint's
  // mask, the stop ids only once the output is complete; a complete output that nothing can
  // continue ends the run ("stop"). Set before the first token.
  void set_constraint(std::shared_ptr<const engine::CompiledConstraint> c);
  bool constrained() const { return constraint_.has_value(); }
  // The next token needs only the greedy pick of its logits row (temperature 0, no penalties, no
  // extractive mask, no constraint): the engine can return that pick (SeqStep::Logits::kGreedy) instead of the row.
  bool greedy_pick_suffices() const;
  // Every later token event also carries the logprobs of the `n` likeliest tokens of its step,
  // under the raw logits (0 = none, the default): sample() finds them, accept() attaches them.
  void set_top_logprobs(int n) { top_logprobs_ = n; }

  void set_auto_commit(bool on);
  // Every event produced so far becomes final (releasable).
  void commit();
  // Events [0, n) become final (n is clamped to the events produced).
  void commit_to(size_t n);
  Checkpoint checkpoint() const;
  // Rolls back to `cp`: the generated tokens after cp.generated and the events after cp.events go
  // (the prompt stays as it is now). The checkpoint must not be older than the last commit
  // (committed events are final): aborts otherwise.
  void restore(const Checkpoint& cp);

  // Sends committed token events not sent yet, in order. False as soon as the sink returns false
  // (the client went away).
  bool release(const EventSink& sink);
  int released() const { return static_cast<int>(sent_); }

 private:
  std::vector<int32_t> tokens_;
  int prompt_len_ = 0;
  int max_new_ = 0;
  std::vector<std::string> stop_strings_;
  std::vector<int32_t> stop_ids_;
  engine::Sampler sampler_;
  std::optional<engine::StreamDecoder> decoder_;  // optional: it holds a reference, so restore re-emplaces it
  std::string out_text_;
  std::string finish_reason_;
  std::vector<RunEvent> events_;  // one per generated token and per pushed event, in order
  size_t committed_ = 0;          // events_[0, committed_) are final
  size_t sent_ = 0;               // events_[0, sent_) went to the sink
  bool auto_commit_ = true;
  bool extractive_ = false;
  std::vector<float> masked_;  // extractive: the masked copy of a logits row
  const engine::Tokenizer* tok_ = nullptr;  // the alternatives' bytes
  int top_logprobs_ = 0;
  std::vector<TokenLogprob> top_;  // the last sample()'s likeliest tokens, until accept()
  std::optional<engine::ConstraintMatcher> constraint_;
};

}  // namespace ragd::pipelines
