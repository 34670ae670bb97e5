// IterativeRag: one iterative RAG run's retrieval during generation (iterative.h): a search at
// every retrieval_interval generated tokens, the context change that follows (prompt rebuilt, KV
// kept up to the first changed token), and the three ways of overlapping search with decoding
// (piperag: the search runs one interval ahead; speculative / both: RaLMSpec's speculated contexts,
// verified by the real searches, rolled back at the first that disagrees).
//
// Boundaries. A boundary b is reached when the run has generated b tokens (b a multiple of the
// interval, b < max_tokens); the context chosen there applies to the tokens from index b on. The
// b-th token is sampled after the new context's prefill. With every mode, the context at b is the
// top-k of a real search for the query at b (question + last query_window tokens before b, or
// before b - query_lag intervals) - except piperag, whose query is one interval older.
//
// Speculation. A speculated boundary takes a checkpoint of the run (RunState) before it changes
// the context; its tokens and events stay uncommitted (never sent) until the real search for it
// agrees. At the first boundary that disagrees, the run goes back to that checkpoint, the KV is
// cut to the tokens both contexts share, the real context goes in, and decoding resumes: exactly
// what the sequential run did at that boundary.
//
// The unit talks to the run loop through RunLoop (by run id) and gets the run's RunState at each
// hook point; it never sees the executor's runs. Ownership: the run owns its unit, from submit on.
// Thread-safety: not thread-safe. The retrieval thread that prepares the run uses it before the
// run is handed over (fetch, wants_vectors, on_first_search, set_context); every other member runs
// on the scheduler thread. Failures: start() and after_token() record them (failure()), the caller
// fails the run; on_search_done() ends the run itself (RunLoop::fail / finish, which destroy the
// unit: it is the last thing it does).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "iterative_state.h"
#include "ragd/common/status.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/executor.h"
#include "run_state.h"

namespace ragd::pipelines {

class IterativeRag {
 public:
  using Clock = std::chrono::steady_clock;

  // What the unit asks of the run loop, by run id (scheduler thread).
  class RunLoop {
   public:
    // Runs `queries` as one batch on the retrieval pool, in the run's tenant scope: the top `fetch`
    // hits of each (the run's k first, context_must_include forced in), with their embeddings when
    // `vectors`. The result comes back as on_search_done(SearchDone{sid, ticket, epoch, ...}).
    // False: refused (the queue is full or stopping).
    virtual bool issue_search(uint64_t sid, uint64_t ticket, uint64_t epoch, std::vector<std::string> queries,
                              int fetch, int nprobe, bool vectors) = 0;
    // Speculation without a search: the query's embedding and its `nprobe` nearest IVF lists.
    // False: no corpus or no embedding (the speculation is then "nothing changes").
    virtual bool embed_query(const std::string& query, int nprobe, std::vector<float>* qv,
                             std::vector<int64_t>* lists) = 0;
    // PipeRAG's performance model: the largest nprobe whose search fits `budget_ms`.
    virtual int choose_nprobe(double budget_ms, int max_nprobe) = 0;
    // Makes `docs` (prompt order) the run's context: KV kept up to the first changed token.
    virtual Status rebuild_prompt(uint64_t sid, const std::vector<ContextDoc>& docs) = 0;
    // After a rollback to a checkpoint with the same context: the run's KV cut to its tokens.
    virtual Status restart_kv(uint64_t sid) = 0;
    // Keeps the run out of the batch (on) or lets it back in (off).
    virtual void hold(uint64_t sid, bool on) = 0;
    // Sends the run's committed events not sent yet; false = the client went away.
    virtual bool release_events(uint64_t sid) = 0;
    // Tests: verify this boundary as wrong whatever the search says.
    virtual bool force_misspeculation(uint64_t sid, int boundary) = 0;
    virtual void fail(uint64_t sid, const Status& st) = 0;
    virtual void finish(uint64_t sid, const std::string& reason) = 0;

   protected:
    ~RunLoop() = default;
  };

  // `nprobe`: the pipeline's; `k`: passages in the context; `question`: the request's query.
  IterativeRag(uint64_t sid, const IterativeParams& params, int k, int nprobe, std::string question,
               std::shared_ptr<const engine::Tokenizer> tok);

  // The first search (retrieval thread, in prepare): as many hits as every later search fetches,
  // with embeddings when the run speculates.
  int fetch() const;
  bool wants_vectors() const;
  void on_first_search(const SearchOutcome& o);    // counts it, fills the speculation cache
  void set_context(std::vector<ContextDoc> docs);  // the first context (prompt order)

  // Hook points of the run loop (scheduler thread).
  // Accepted: boundaries from the first interval on; piperag's first search goes out.
  void start(RunState& s, RunLoop& loop);
  // After each sampled token (`reason`: the run's finish reason, "" = go on): retrieval at
  // boundaries, commits and releases what is verified. Returns the finish reason; "" while a
  // finish waits for verification.
  std::string after_token(RunState& s, std::string reason, RunLoop& loop);
  // A search issued by the unit finished. May end the run (and so destroy this unit).
  void on_search_done(SearchDone d, RunState& s, RunLoop& loop);
  // The run ends: let it out of a hold, fill its usage and timings.
  void on_finish(RunLoop& loop, Usage& usage, Timings& timings);

  // Set when a hook failed; the caller fails the run with it.
  const std::optional<Status>& failure() const { return failure_; }

 private:
  uint64_t issue(std::vector<std::string> queries, int nprobe, RunLoop& loop);  // 0 = refused
  void issue_ahead(RunState& s, int boundary, RunLoop& loop);  // piperag: the search for boundary + interval
  void take_ahead(RunState& s, RunLoop& loop);                 // none / piperag: the awaited result arrived
  void speculate(RunState& s, int boundary, RunLoop& loop);
  void verify_pending(RunLoop& loop);
  void settle(RunState& s, RunLoop& loop);  // speculative / both: verified boundaries in order
  void rollback(RunState& s, const IterState::Pending& p, std::vector<ContextDoc> real, RunLoop& loop);
  std::string query(const RunState& s, int boundary) const;
  void change_context(std::vector<ContextDoc> docs, RunLoop& loop);
  void announce_context(RunState& s, int from_token);  // a sources event in the run's ordered stream
  void set_hold(bool on, RunLoop& loop);
  bool release_settled(RunState& s, RunLoop& loop);  // speculative runs: commit what is verified; false = client gone

  uint64_t sid_;
  std::shared_ptr<const engine::Tokenizer> tok_;
  IterState it_;
  std::optional<Status> failure_;
};

}  // namespace ragd::pipelines
