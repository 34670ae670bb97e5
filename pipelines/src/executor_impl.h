// ExecutorImpl: the Executor over one Model, its KvPool, the kvstore (the one KV cache: pool, DRAM,
// SSD) and an optional corpus. Pieces:
//   executor_impl.cpp  the run loop: submit -> prepare (retrieval pool) -> accept -> step -> finish
//   kv_host.*          the KvHost the scheduler drives: admit (reuse install), swap, preempt
//   reuse_planner.*    lookup -> install -> publish, one strategy per reuse mode
//   run_state.*        a run's generation state with checkpoints and the committed-token emitter
//   speculative_prefill.*  speculative prefill of one-shot RAG runs: the staged search, candidates,
//                      the held first token (SpeculativePrefill; the run loop is its RunLoop)
//   iterative_rag.*    iterative RAG: searches during generation, context changes, speculation,
//                      verification and rollback (IterativeRag, one per run; the run loop is its
//                      RunLoop and calls it at start, after each sampled token, on a search
//                      result and at finish)
//   sequence_parallel_route.*  long prompts on the sequence-parallel group, prefill to last token,
//                      on the route's own thread with its own rank-0 model (SequenceParallelRoute,
//                      which owns both and the group; executor_sp.cpp is the run loop's side:
//                      which runs take it, hand-over and return, and its RunLoop)
//   reranker.*         reranking (keep_best: the run loop calls it on a one-shot run's passages)
//   executor_retrieval.cpp  the run loop's retrieval: search_passages (tenant-scoped), ranking,
//                      context passages and the RAG prompt
//   executor_stats.cpp the typed stats snapshot
// One scheduler thread owns the model, the pool and every admitted run; retrieval and prompt
// building run on a small thread pool and hand runs over through inbox_ (guarded by mu_). KV that
// comes up from DRAM / SSD loads on the kvstore's I/O pool; the run waits in loading_ (not in the
// scheduler) until its load is done, and nobody blocks on it.
// Thread-safety: the public Executor methods are thread-safe; everything marked "scheduler thread"
// runs on the scheduler thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "draft_budget.h"
#include "model_drafter.h"
#include "ngram_drafter.h"
#include "output_ngrams.h"
#include "semantic_cache.h"
#include "ragd/common/fair_pool.h"
#include "ragd/engine/constraint_cache.h"
#include "ragd/engine/model.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/kvstore/kv_store.h"
#include "ragd/pipelines/adapt_history.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/run_params.h"
#include "ragd/pipelines/runtime.h"
#include "ragd/seqparallel/sp_group.h"
#include "ragd/pipelines/scheduler.h"
#include "ragd/pipelines/length_log.h"

#include "iterative_rag.h"
#include "kv_host.h"
#include "ragd/pipelines/prompt_builder.h"
#include "reuse_planner.h"
#include "reranker.h"
#include "run_state.h"
#include "sequence_parallel_route.h"
#include "speculative_prefill.h"
#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#endif

namespace ragd::retrieval {
class Corpus;
struct Hit;
}

namespace ragd::pipelines {

inline double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

class ExecutorImpl final : public Executor,
                           private SpeculativePrefill::RunLoop,
                           private IterativeRag::RunLoop,
                           private SequenceParallelRoute::RunLoop {
 public:
  struct Deps {
    std::unique_ptr<engine::Model> model;
    std::shared_ptr<const engine::Tokenizer> tokenizer;
    // The model's own chat template (null: it ships none, or it did not compile): PromptBuilder.
    std::shared_ptr<const engine::ModelChatTemplate> chat_template;
    std::shared_ptr<retrieval::Corpus> corpus;  // null: pipelines with top_k > 0 fail
    std::vector<PipelineSpec> pipelines;
    std::string model_name;
    // Sequence-parallel workers for long prompts (RuntimeOptions::sp_workers > 1, MPI ranks, or
    // one spilling worker); null = none. Its rank 0 is `sp_rank0`, a sibling of `model`.
    std::unique_ptr<seqparallel::SpGroup> sp;
    std::unique_ptr<engine::Model> sp_rank0;
    // Pipelines with [retriever] rerank > 0 and no rerank_model: the generator's reranker (its own
    // copy of the model); null = none.
    std::unique_ptr<Reranker> reranker;
    // Pipelines with [retriever] rerank_model: one cross-encoder stage per directory (the key).
    std::map<std::string, std::unique_ptr<PassageReranker>> cross_encoders;
    // Answers of [semantic_cache] pipelines (shared with the documents API, which invalidates it).
    std::shared_ptr<SemanticCache> semantic_cache;
    // Draft models of speculative method "draft" (model_drafter.h), by directory as configured
    // (runtime.speculative_draft_model, pipelines' [generation] speculative.draft_model).
    std::map<std::string, std::unique_ptr<ModelDrafter>> draft_models;
  };
  // Opens the kvstore over the model's pool (RuntimeOptions::kvstore_options()) and starts the threads.
  static Result<std::unique_ptr<ExecutorImpl>> create(const RuntimeOptions& opts, Deps deps);
  ~ExecutorImpl() override;

  Status submit(RunRequest req, EventSink sink) override;
  void cancel(const std::string& request_id) override;
  std::vector<PipelineInfo> pipelines() const override;
  bool ready() const override { return !stopping_.load(); }
  std::string model_name() const override { return model_name_; }
  engine::ToolCallFormat tool_call_format() const override { return prompts_->tool_call_format(); }
  ExecutorStats stats() const override;
  // Drains queued and running requests, joins the threads, moves the pool's cached KV down to
  // DRAM / SSD and flushes the SSD tier. Idempotent.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  // One run, from submit to done.
  struct Run {
    uint64_t sid = 0;
    RunRequest rr;
    EventSink sink;
    ResolvedRun res;                         // every run parameter, resolved once at submit (run_params.h)
    std::vector<int32_t> prompt;             // set by prepare
    std::vector<std::vector<int32_t>> path;  // RAG prompt segments before the question
    std::optional<RunState> state;           // from accept on
    RunKv kv;                                // table, swap copy, reuse plan (scheduler thread after prepare)
    Usage usage;
    Timings timings;
    Clock::time_point t_submit, t_ready, t_first, t_last;
    std::string error;  // set when preparation failed
    // The code the run fails with when `error` is set: kUnavailable for a failed search or
    // reranking, the search's own code for a client error (kInvalidArgument: a
    // context_must_include naming no document of the tenant).
    StatusCode error_code = StatusCode::kUnavailable;
    // Records a failed retrieval step: the client's errors keep their code and message.
    void set_failure(const char* what, const Status& st) {
      const bool client = st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kNotFound;
      error_code = client ? st.code() : StatusCode::kUnavailable;
      error = client ? st.message() : std::string(what) + " failed: " + st.to_string();
    }
    std::unique_ptr<IterativeRag> iter;  // iterative pipelines: the unit, from submit on
    // One-shot runs with speculative prefill: the unit, from the first candidates on.
    std::unique_ptr<SpeculativePrefill> spec_prefill;
    // Structured output: the request's constraint compiled for this tokenizer (null: none).
    std::shared_ptr<const engine::CompiledConstraint> constraint;
    // Speculative decoding (ngram_drafter.h): the run's drafter (null: off; its adaptive length
    // serves both methods), its draft model (method draft, model_drafter.h; null: n-gram drafts)
    // and the draft its next decode step verifies (scheduler thread).
    // A run of method draft drafts with its model only in the steps the draft-model gate passes
    // (draft_budget.h, draft_model_pays), from the n-gram lookup in the others.
    std::optional<NgramDrafter> drafter;
    ModelDrafter* model_drafter = nullptr;
    std::vector<int32_t> draft;
    bool draft_from_answers = false;  // the draft came from earlier answers (output_ngrams.h)
    bool draft_from_model = false;    // the draft is (or is to be) the draft model's
    bool model_verified = false;      // a draft of the draft model was verified in this run
    // Its per-token acceptance so far, by state (draft_budget.h): n-gram drafts / the draft model's.
    DraftHistory drafts, model_drafts;
    // Method draft: its decode tokens when the draft model was first fed its prompt (-1: not yet),
    // and the tokens made since in steps the model drafted (ModelShare); a prefill pending for
    // the draft about to be made.
    int model_fed_at = -1, model_made = 0;
    bool model_feed_pending = false;
    // Output length: the max_tokens the scheduler and the length features see, and a benchmark's
    // hidden stop (RuntimeTestHooks::stop_after_tokens; 0 = none), which the run ends at.
    int sched_max_new = 0;
    int hidden_stop = 0;
    // [semantic_cache] pipelines: the run's cache key, question embedding and source documents
    // (empty key: not looked up), and the earlier answer when the lookup found one.
    std::string semantic_key;
    std::vector<float> semantic_embedding;
    std::vector<std::string> semantic_docs;
    std::vector<std::string> semantic_grounded;  // grounded terms (semantic_cache.h), when checked
    std::optional<SemanticCache::Hit> semantic_hit;
  };

  ExecutorImpl(const RuntimeOptions& opts, Deps deps);
  void prepare(std::unique_ptr<Run> r);  // retrieval pool: retrieval + prompt + reuse lookup
  // Retrieval pool: a speculative prefill's progressive search (SpeculativePrefill::search), whose
  // first candidates already hand the run to the scheduler.
  void prepare_speculative(std::unique_ptr<Run> r);
  void hand_over(std::unique_ptr<Run> r);  // prompt built: reuse lookup, then the inbox
  // Adaptive pipelines (executor_adapt.cpp), any thread: the load now, and the choice of run `r`'s
  // configuration (adapt_run) from its first search's passages (null: before any search), applied to r.res
  // and reported in r.usage.adapt.
  LoadSignals load_now() const;
  void adapt_run(Run& r, const std::vector<ContextDoc>* hits);
  // Retrieval pool: an adaptive run reranked; `kept_first`: it kept the retriever's first passage.
  void adapt_reranked(const Run& r, bool kept_first);
  // Scheduler thread: an adaptive run's first token (its work leaves the work ahead; its TTFT goes
  // into the tenant's history).
  void adapt_first_token(const Run& r, Clock::time_point now);
  // SpeculativePrefill::RunLoop and IterativeRag::RunLoop, scheduler thread: what the speculative
  // prefill and iterative RAG units ask of a run (hold, rebuild_prompt, fail and finish serve both).
  void hold(uint64_t sid, bool on) override;
  Status rebuild_prompt(uint64_t sid, const std::vector<ContextDoc>& docs) override;
  bool release_sources(uint64_t sid, std::vector<Source> sources) override;
  void feed_first_token(uint64_t sid, std::span<const float> logits) override;
  // After a step fed the run: the sampled token (logits non-null) goes out, the prompt KV is
  // published, and a finished run ends.
  // `pick`: the token already drawn from `logits` (step() samples a batch's rows together).
  void after_feed(Run& r, std::span<const float> logits, bool sampled,
                  const std::optional<engine::SampleResult>& pick = std::nullopt);
  // Speculative decoding, scheduler thread: drafts for the runs about to decode (before a plan),
  // and a step's verification of run r's draft (rows: its 1 + draft logits rows, in order).
  void plan_drafts();
  // Semantic reuse (semantic_cache.h): the lookup after a [semantic_cache] pipeline's retrieval
  // (retrieval thread), and a hit's answer sent as the run's tokens (scheduler thread).
  void semantic_lookup(Run& r, const std::vector<ContextDoc>& ctx);
  void answer_from_cache(Run& r);
  void verify_draft(Run& r, const BatchItem& it, const engine::StepOutput& out, size_t item);
  // Submit: the run's draft model when its speculative method is "draft" (InvalidArgument naming
  // the directory when the server did not load it).
  Status choose_draft_model(Run& r) const;
  // The RAG prompt of run `r` over `docs` (prompt order).
  PromptSegments rag_prompt(const Run& r, const std::vector<ContextDoc>& docs) const;
#if RAGD_HAVE_RETRIEVAL
  // A retrieved chunk as a context passage (token ids, source; the hit's text and ids move out).
  ContextDoc context_doc(retrieval::Hit& h) const;
  // Whose documents run `r` may read: its tenant's and the shared ones. Every corpus read of a run
  // (plain, progressive, iterative, rerank candidates, context_must_include) takes this scope.
  static retrieval::ReadScope read_scope(const Run& r) { return retrieval::ReadScope::tenant(r.rr.tenant); }
  // Search hits in rank order from index `from` on: score, then chunk id (ties in a fixed order).
  static void rank_hits(std::vector<retrieval::Hit>& hits, size_t from = 0);
#endif
  // Rebuilds a RAG run's prompt over `docs` (prompt order); KV is kept up to the first changed
  // token and the reuse plan is dropped.
  Status rebuild_prompt(Run& r, const std::vector<ContextDoc>& docs);
#if RAGD_HAVE_RETRIEVAL
  Status include_document(const std::string& id, const std::string& tenant, int k,
                          std::vector<retrieval::Hit>* hits) const;
#endif
  void loop();                           // scheduler thread
  void step();
  // The run's next token needs only the engine's greedy pick, not its logits row.
  bool greedy_on_engine(const Run& r) const;
  // Runs a pending blend repair as a step of its own (when the run's next step is not its first
  // prefill); normally it rides in that step (blend_step.h).
  void repair_alone(Run& r);
  // The tokens of a step's sampled rows, drawn on all cores (a row held for a speculative search is
  // left empty: it is drawn later from its kept logits).
  std::vector<std::optional<engine::SampleResult>> sample_rows(const StepPlan& plan, const engine::StepOutput& out);
  void accept(std::unique_ptr<Run> r);
  void schedule_run(Run& r);             // into the scheduler (its KV is ready to install)
  void admit_loaded();                   // loading_ runs whose load finished
  void finish(uint64_t sid, const std::string& reason) override;
  void fail(uint64_t sid, const Status& st) override;
  // Advances the run by one sampled token and releases committed tokens; returns the finish reason
  // ("" = go on; "cancelled" when the client went away).
  std::string on_sampled(Run& r, std::span<const float> logits,
                         const std::optional<engine::SampleResult>& pick = std::nullopt);
  void drop_run(Run& r);
  // The run no longer counts as live (before its final event: a client's next run, submitted on
  // that event, never sees it among the runs ahead; adapt's load_now counts live runs).
  void forget_name(const Run& r);
  bool emit(Run& r, const RunEvent& ev);

  // Search of the pipeline's passages (any thread), several queries in one batch: the top `fetch`
  // hits of each (the first k with context_must_include forced in), with their embeddings when
  // asked.
  std::vector<SearchOutcome> search_passages(std::span<const std::string> queries, const std::string& tenant, int k,
                                             int fetch, int nprobe, retrieval::RetrievalMode mode,
                                             const retrieval::MetadataFilter* filter, const std::string& must_include,
                                             bool vectors);
  // Sequence parallelism (executor_sp.cpp, sequence_parallel_route.h): whether a run takes the
  // route; handing it over (scheduler thread: it runs on the route's thread, beside the batch);
  // its end, back on the scheduler thread.
  bool sp_route(const Run& r) const;
  void start_sequence_parallel(Run& r);
  void end_sequence_parallel(uint64_t sid, SequenceParallelRoute::Outcome o);
  // The route's run `sid` (under mu_); null once it is back.
  Run* sp_run(uint64_t sid) const;
  // SequenceParallelRoute::RunLoop (executor_sp.cpp), the route's thread.
  std::string next_token(uint64_t sid, std::span<const float> logits) override;
  bool cancelled(uint64_t sid) override;
  void prefill_progress(uint64_t sid, int64_t done, int64_t total, int64_t pool_used_blocks) override;
  void route_done(uint64_t sid, SequenceParallelRoute::Outcome outcome) override;
  // IterativeRag::RunLoop (executor_retrieval.cpp), scheduler thread: the rest of what the
  // iterative RAG unit asks of a run.
  bool issue_search(uint64_t sid, uint64_t ticket, uint64_t epoch, std::vector<std::string> queries, int fetch,
                    int nprobe, bool vectors) override;
  bool embed_query(const std::string& query, int nprobe, std::vector<float>* qv,
                   std::vector<int64_t>* lists) override;
  int choose_nprobe(double budget_ms, int max_nprobe) override { return search_time_.choose(budget_ms, max_nprobe); }
  Status restart_kv(uint64_t sid) override;
  bool release_events(uint64_t sid) override;
  bool force_misspeculation(uint64_t sid, int boundary) override;


  RuntimeOptions opts_;
  std::unique_ptr<engine::Model> model_;
  // Long prompts' route (null: none), with its own rank-0 model and thread; reset by stop() once the
  // scheduler thread has ended (its thread calls back into this object).
  std::unique_ptr<SequenceParallelRoute> sp_;
  std::shared_ptr<const engine::Tokenizer> tok_;
  std::shared_ptr<retrieval::Corpus> corpus_;
  std::shared_ptr<SemanticCache> semantic_;
  OutputNgrams output_ngrams_;  // speculative drafts from earlier answers, per scope (scheduler thread)
  std::vector<PipelineSpec> specs_;
  std::string model_name_;
  std::unique_ptr<PromptBuilder> prompts_;
  // Structured output: compiled constraints by spec (thread-safe; built on the first constrained run).
  engine::ConstraintCache& constraints();
  std::once_flag constraints_once_;
  std::unique_ptr<engine::ConstraintCache> constraints_;
  std::atomic<bool> constraints_ready_{false};  // constraints_ built (stats() reads it from any thread)
  std::unique_ptr<Reranker> reranker_;  // used by the retrieval threads (it is thread-safe)
  std::map<std::string, std::unique_ptr<PassageReranker>> cross_encoders_;  // by directory; thread-safe stages
  std::unique_ptr<kvstore::KvStore> store_;
  std::unique_ptr<ReusePlanner> planner_;

  // scheduler thread only
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<PoolKvHost> kv_host_;
  std::unique_ptr<LengthLogWriter> length_log_;  // runtime.length_log; null = off
  std::unordered_map<uint64_t, std::unique_ptr<Run>> runs_;
  std::unordered_map<std::string, uint64_t> by_name_;
  std::unordered_set<std::string> early_cancels_;  // cancelled while still in retrieval
  std::vector<uint64_t> loading_;                  // accepted, KV still loading

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Run>> inbox_;      // guarded by mu_
  std::deque<SearchDone> searches_done_;        // guarded by mu_: iterative searches, finished
  std::deque<SpeculativePrefill::Candidate> candidates_;  // guarded by mu_: speculative prefill stages
  std::vector<std::string> cancels_;            // guarded by mu_
  // The long-context route (executor_sp.cpp), guarded by mu_: its runs (owned by runs_, stepped on
  // the route's thread), the ones whose client went away, and the ones that came back.
  std::unordered_map<uint64_t, Run*> sp_runs_;
  std::unordered_set<uint64_t> sp_cancelled_;
  std::deque<std::pair<uint64_t, SequenceParallelRoute::Outcome>> sp_done_;
  std::unordered_set<std::string> live_names_;  // guarded by mu_: submitted, not yet done
  // guarded by mu_: adaptive runs chosen and before their first token, by sid: the prefill and
  // reranking tokens each still has (adapt_work_tokens; LoadSignals::work_ahead_tokens sums them).
  std::unordered_map<uint64_t, double> adapt_work_;
  AdaptHistory adapt_history_;  // thread-safe: per tenant and pipeline record of adaptive runs
  int pending_ = 0;                             // guarded by mu_: submitted, not yet in inbox
  bool load_done_ = false;                      // guarded by mu_: a KV load finished
  bool copies_done_ = false;                    // guarded by mu_: a pool-to-DRAM copy finished
  // Scheduler thread: the last step planned nothing (every runnable request waits for blocks). The
  // engine is idle then, so queued pool-to-DRAM copies run and give back the blocks they hold.
  bool stalled_ = false;
  // Scheduler thread: speculative decoding's measured step cost (decode-only steps), the server's
  // recent per-token acceptance (decayed counts: the prior of a run with few drafts of its own)
  // and its counters (ExecutorStats::spec_ngram).
  StepCostModel step_cost_;
  // By the runs' states, decayed per verification: n-gram drafts, the draft models' drafts. The
  // latter also fade with each run of method draft that ended without drafting with its model
  // (kModelIdleFade), so that a low estimate the gate then never tests again drifts back towards
  // the neutral prior and a later run tries the model again.
  DraftHistory recent_drafts_, recent_model_drafts_;
  ModelShare recent_model_share_;  // over the runs that paid a prefill, decayed per run
  static constexpr double kModelShareDecay = 0.9;
  static constexpr double kModelSharePrior = 0.5, kModelSharePriorTokens = 32;
  static constexpr double kModelIdleFade = 0.9;
  ExecutorStats::Speculative spec_counts_;        // n-gram drafts
  ExecutorStats::Speculative spec_draft_counts_;  // draft-model drafts
  // Draft models by configured directory (read-only map after create; each drafter is used on the
  // scheduler thread only).
  std::map<std::string, std::unique_ptr<ModelDrafter>> draft_models_;
  uint64_t next_sid_ = 1;                       // guarded by mu_
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;                        // guarded by mu_

  mutable std::mutex stats_mu_;
  ExecutorStats stats_;  // guarded by stats_mu_: scheduler-side snapshot (publish_stats)
  void publish_stats();  // scheduler thread

  int batch_tokens_ = 0;  // the scheduler's max_batch_tokens (set at create, then read-only)
  SearchTimeModel search_time_;  // thread-safe: piperag's search latency by nprobe
  std::unique_ptr<FairPool> retrieval_pool_;  // keyed by tenant
  std::thread thread_;
};

}  // namespace ragd::pipelines
