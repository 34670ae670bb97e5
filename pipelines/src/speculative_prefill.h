// SpeculativePrefill: one one-shot RAG run's speculative prefill (RAGCache's speculative
// pipelining). The search runs in stages (IVF nprobe / 4, / 2, then the pipeline's nprobe) and each
// stage's top-k, when it differs from the last one, becomes the run's prompt at once, so prefill
// starts before the search ends. A change of candidates rebuilds the prompt and keeps the KV up to
// the first changed token (the abandoned part is recomputed); when the final result equals the
// candidates the prefill is used as is. The first token is not sampled before the final result is
// in: logits computed earlier wait with the run, and are used only if the prompt did not change
// since. The speculation runs only while the batch has room (no waiting run, a free running slot);
// otherwise the run is held until its search ends. Searches that are not IVF (or not trained yet)
// have one stage: the run is then a plain one. Every stage is searched and fetched in the run's
// tenant scope (Search::scope).
//
// The unit talks to the run loop through RunLoop (the scheduler-side calls) and Search's callbacks
// (the retrieval-side ones); it never sees the executor's runs. Ownership: the run owns its unit,
// from the first candidates on. Thread-safety: search() runs on a retrieval thread; every other
// member on the scheduler thread. A RunLoop call that ends the run (fail, finish, and
// feed_first_token, which may finish it) destroys the unit: the unit makes it last.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/pipelines/executor.h"
#include "speculation_cache.h"

namespace ragd::retrieval {
class Corpus;
class ReadScope;
struct Hit;
}  // namespace ragd::retrieval

namespace ragd::pipelines {

class SpeculativePrefill {
 public:
  using Clock = std::chrono::steady_clock;

  // A stage of the search, on its way to the scheduler thread (Search::post, then on_candidate).
  struct Candidate {
    uint64_t sid = 0;
    std::vector<ContextDoc> docs;  // prompt order
    std::vector<Source> sources;   // final: rank order
    bool final = false;
    Status status;
  };

  // What the unit asks of the run loop, by run id (scheduler thread).
  class RunLoop {
   public:
    // Keeps the run out of the batch (on) or lets it back in (off).
    virtual void hold(uint64_t sid, bool on) = 0;
    // Makes `docs` (prompt order) the run's context: KV kept up to the first changed token.
    virtual Status rebuild_prompt(uint64_t sid, const std::vector<ContextDoc>& docs) = 0;
    // The sources event into the run's ordered stream, released; false = the client went away.
    virtual bool release_sources(uint64_t sid, std::vector<Source> sources) = 0;
    // The first token, drawn from logits kept since the prompt's prefill (may end the run).
    virtual void feed_first_token(uint64_t sid, std::span<const float> logits) = 0;
    virtual void fail(uint64_t sid, const Status& st) = 0;
    virtual void finish(uint64_t sid, const std::string& reason) = 0;

   protected:
    ~RunLoop() = default;
  };

  // One run's progressive search (retrieval thread).
  struct Search {
    uint64_t sid = 0;
    Clock::time_point t_submit;  // the run's submit: retrieval_ms counts from it
    Clock::time_point t_start;   // the search's start: the wait before the first candidates
    const retrieval::Corpus* corpus = nullptr;
    std::string query;
    int k = 0;
    int nprobe = 1;                               // the pipeline's: the last stage
    const retrieval::ReadScope* scope = nullptr;  // the run's tenant scope; never null
    double delay_ms = 0;                          // test hook: a remote index's round trip, spread over the stages
    // Hits (moved out) as context passages in prompt order, ranked as search_passages ranks them;
    // `ranked`, when not null, gets their sources in rank order.
    std::function<std::vector<ContextDoc>(std::vector<retrieval::Hit>& hits, std::vector<Source>* ranked)> docs;
    // The first candidates: the run goes to the scheduler now, on `docs`, owning `unit`.
    std::function<void(std::vector<ContextDoc> docs, std::unique_ptr<SpeculativePrefill> unit)> start;
    // A later stage (or the final result) for the scheduler thread.
    std::function<void(Candidate)> post;
  };
  // The search's result when no stage before the last had candidates: the run is a plain one.
  struct Plain {
    Status status;
    std::vector<ContextDoc> docs;  // prompt order
    std::vector<Source> sources;   // rank order
  };
  // Runs the search. nullopt: the run was handed over (Search::start) and the final result posted.
  static std::optional<Plain> search(const Search& s);

  // Hook points of the run loop (scheduler thread).
  // The first token waits for the final search result: the engine's greedy pick does not do, the
  // row is not sampled with the batch's, and the logits go to keep_first_token().
  bool holds_first_token() const { return !confirmed_; }
  void keep_first_token(std::span<const float> logits, RunLoop& loop);
  // Admitted to the scheduler; `batch_has_room`: no waiting run and a free running slot.
  void on_scheduled(bool batch_has_room, RunLoop& loop);
  // A stage posted by search(). May end the run (and so destroy this unit).
  void on_candidate(Candidate c, RunLoop& loop);
  // The run ends: let it out of a hold, fill its usage and timings.
  void on_finish(RunLoop& loop, Usage& usage, Timings& timings);

 private:
  SpeculativePrefill(uint64_t sid, Clock::time_point t_submit, std::vector<uint64_t> ids, double wait_ms)
      : sid_(sid), t_submit_(t_submit), ids_(std::move(ids)), wait_ms_(wait_ms) {}
  void set_hold(bool on, RunLoop& loop);

  uint64_t sid_;
  Clock::time_point t_submit_;
  bool confirmed_ = false;                    // the final search result is in
  std::vector<uint64_t> ids_;                 // the passages the prompt holds now (sorted chunk ids)
  std::optional<std::vector<float>> logits_;  // first-token logits computed before confirmation
  bool held_ = false;
  int restarts_ = 0;
  Clock::time_point wait_since_;
  double wait_ms_ = 0;        // search time the prefill could not overlap
  double retrieval_ms_ = 0;   // submit to the final result (set on confirmation)
};

}  // namespace ragd::pipelines
