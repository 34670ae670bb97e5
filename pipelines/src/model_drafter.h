// Private to pipelines: drafts for speculative decoding from a small draft model (speculative
// `method = "draft"`), the other member of the draft-source family beside the n-gram lookup
// (ngram_drafter.h). The draft model shares the serving model's tokenizer (same vocabulary, same
// ids; checked at open) and runs on an engine instance of its own, with its own KV pool, owned by
// this unit — the serving model and its pool stay the scheduler's, as the reranker's second copy
// of the model does (reranker.h).
//
// Per decoding run the unit keeps the draft model's KV of the run's tokens (prompt and output) in
// one block table, and the tokens it holds. A draft of n tokens for a run whose tokens are t[0..T)
// (the last one not yet fed to the serving model) is n greedy steps of the draft model: the first
// feeds what its KV lacks of t (the prompt at a run's first draft, afterwards the tokens the last
// verification accepted plus the serving model's own token), each next one feeds the previous
// draft token (a chain). Every run drafting in the same decode step rides in the same draft-engine
// step, one row each (kGreedy: only the argmax comes back). After a verification settle() rolls
// the run's draft KV back to the prefix the run kept (rejected draft tokens' KV is cut off, as the
// serving model's is); the next draft also checks the held tokens against the run's and feeds
// from the first difference, so any other rollback is caught up the same way.
//
// Drafts are greedy, a deterministic function of the run's tokens; verification draws every row
// from the serving model's own distribution with the run's sampler and takes draft tokens while
// they equal the drawn ones (ExecutorImpl::verify_draft), so the output is the one decoding without
// drafts gives, greedy or sampled (the same argument as for n-gram drafts).
//
// Cost, measured (first at construction, on a scratch sequence: a prompt-sized feed and a few
// chain steps; then as a moving average over the real drafts): token_seconds(), the draft time per
// drafted token of steps that feed at most kPrefillFeed tokens per run (chain steps and the
// catch-up after a verification), which the step budget (draft_budget.h, DraftCandidate::draft_s)
// adds to each draft token's row; and feed_token_seconds(), the time per token fed in the other
// steps (a run's prompt, or a long stretch it drafted otherwise), from which feed_seconds() prices
// what a run's next draft must feed first — the cost the draft-model gate (draft_model_pays)
// weighs against the run's expected saving.
// Thread-safety: none; owned by the executor, used on its scheduler thread only (open() may run
// anywhere).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/engine/tokenizer.h"

namespace ragd::pipelines {

class ModelDrafter {
 public:
  // Loads the draft model in `dir` with the serving model's device, weight format and threads
  // (`target_opts`) and a KV pool holding as many tokens as the serving model's. InvalidArgument
  // naming the directory when it is not a model, or when its vocabulary or tokenizer differ from
  // the serving model's (`target_cfg`, `target_tok`): its drafts would be other tokens' ids.
  static Result<std::unique_ptr<ModelDrafter>> open(const std::string& dir, const engine::ModelOptions& target_opts,
                                                    const engine::ModelConfig& target_cfg,
                                                    const engine::Tokenizer& target_tok);
  // Over an already loaded draft model (tests); `dir` names it in stats and errors.
  ModelDrafter(std::unique_ptr<engine::Model> model, std::string dir);
  ~ModelDrafter();
  ModelDrafter(const ModelDrafter&) = delete;
  ModelDrafter& operator=(const ModelDrafter&) = delete;

  struct Request {
    uint64_t run = 0;                 // the run's key (its draft KV)
    std::span<const int32_t> tokens;  // the run's tokens; the last one is the one about to be fed
    int n = 0;                        // draft tokens wanted
    std::vector<int32_t>* out = nullptr;  // receives the draft (fewer tokens only when the pool is full)
  };
  // Drafts every request in batched draft-model steps. A step that fails (no KV block left after
  // dropping the KV of runs not drafting now, or an engine error) ends the drafts there: drafts
  // are an optimisation, and the requests keep what they got.
  void draft(std::span<Request> requests);
  // After a verification: the run's tokens now (prompt, accepted drafts, the serving model's
  // token); its draft KV is cut back to the longest prefix it holds of them.
  void settle(uint64_t run, std::span<const int32_t> tokens);
  // The run ended: its draft KV goes back to the pool.
  void forget(uint64_t run);

  // Feeds longer than this per run are a prefill: priced by feed_seconds(), not token_seconds().
  static constexpr size_t kPrefillFeed = 32;
  // Measured seconds of draft-model time per drafted token (steps without a prefill).
  double token_seconds() const { return token_s_; }
  // Measured seconds per token fed in a prefill step.
  double feed_token_seconds() const { return feed_token_s_; }
  // Seconds the run's next draft must spend first feeding what its draft KV lacks of `tokens` (the
  // run's tokens; the last one is always fed): 0 when that is at most kPrefillFeed tokens (a
  // catch-up, in token_seconds()), else those tokens at feed_token_seconds().
  double feed_seconds(uint64_t run, std::span<const int32_t> tokens) const;
  const std::string& dir() const { return dir_; }
  const engine::Model& model() const { return *model_; }

  struct Stats {
    uint64_t steps = 0;           // draft-model steps
    uint64_t tokens = 0;          // tokens drafted
    uint64_t fed_tokens = 0;      // tokens fed (catch-up, prompts, draft chains)
    double seconds = 0;           // draft-model time in all
    size_t pool_used_blocks = 0;  // the draft pool now
    size_t pool_blocks = 0;
  };
  Stats stats() const;

 private:
  struct Seq {
    engine::BlockTable table;
    std::vector<int32_t> held;  // the tokens whose KV `table` holds, in order
  };
  // Cuts `s` back to the longest prefix of `tokens` it holds, at most `limit` tokens.
  void cut(Seq& s, std::span<const int32_t> tokens, size_t limit);
  // Drops the KV of every run outside `keep` (a full pool); true when something was freed.
  bool drop_idle(std::span<const Request> keep);
  // The first estimates of token_s_ and feed_token_s_: a prefill and chain steps on a scratch
  // sequence (each timed after a warm-up step); left 0 when the pool cannot hold it.
  void calibrate();

  std::unique_ptr<engine::Model> model_;
  std::string dir_;
  std::unordered_map<uint64_t, Seq> seqs_;
  Stats stats_;
  double token_s_ = 0;       // moving average of draft seconds per drafted token
  double feed_token_s_ = 0;  // moving average of draft seconds per token fed in prefill steps
};

}  // namespace ragd::pipelines
