// pipelines::Executor: the daemon's single entry into running models.
//
// A run is submitted with a callback sink; events flow back in order on an executor thread:
//   sources (RAG runs only) -> token... -> done | error
// Iterative pipelines send a further sources event whenever the context changes, between the
// tokens, with the index of the first token generated under it (RunEvent::from_token).
// The sink must not block: the daemon posts each event to the session's strand.
// cancel(id) (or a sink that returned false from on_event) frees the request's KV blocks at the next
// scheduler step; the run then ends with its done event (finish_reason "cancelled", usage of what
// it did), delivered to the sink like any other.
//
// Thread-safety: every method is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ragd/retrieval/retrieval_mode.h"
#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/engine/sampler.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/engine/tool_calls.h"
#include "ragd/pipelines/adapt_policy.h"
#include "ragd/pipelines/draft_method.h"
#include "ragd/pipelines/executor_stats.h"
#include "ragd/pipelines/iterative.h"
#include "ragd/pipelines/param_range.h"

namespace ragd::pipelines {

// Where a run's prompt KV comes from. Exact modes give the logits of a full prefill (within fp
// tolerance); the approximate modes (CacheBlend, EPIC) reuse each retrieved document's KV computed
// on its own, wherever it lands in the prompt, and repair cross-attention by recomputing a few
// tokens (docs/design/blend.md).
// kAuto: per model, the fastest approximate mode whose reuse self-check passes on this model (EPIC
// k 16, EPIC k 32, CacheBlend 15 %, CacheBlend 30 %, in order of cost), else exact (knowledge tree).
enum class ReuseMode : uint8_t { kNone, kPrefix, kKnowledgeTree, kCacheBlend, kEpic, kAuto };
inline constexpr int kNumReuseModes = 6;  // the values are 0 .. kNumReuseModes - 1
inline constexpr auto kReuseModeNames = make_enum_names<ReuseMode>(
    "reuse", {{ReuseMode::kNone, "none"},
              {ReuseMode::kPrefix, "prefix"},
              {ReuseMode::kKnowledgeTree, "knowledge_tree"},
              {ReuseMode::kCacheBlend, "cacheblend"},
              {ReuseMode::kEpic, "epic"},
              {ReuseMode::kAuto, "auto"}});
constexpr const auto& ragd_enum_names(ReuseMode) { return kReuseModeNames; }
static_assert(enum_names_valid(kReuseModeNames) && kReuseModeNames.entries.size() == kNumReuseModes);
inline std::string_view reuse_mode_name(ReuseMode m) { return enum_name(m); }
// True for the modes that may place KV a full prefill would not compute (cacheblend, epic, and auto,
// which may blend): the mode's reuse strategy says (reuse_strategy.cpp in the pipelines library).
bool is_approximate(ReuseMode m);
// The one parser of reuse mode names (pipeline specs, request bodies, ragctl); InvalidArgument
// listing the names otherwise. Header-only (enum_names.h): the daemon's HTTP layer uses it without
// linking the pipelines library.
inline Result<ReuseMode> parse_reuse_mode(std::string_view s) { return parse_enum<ReuseMode>(s); }

// Parameters of the approximate modes. Ranges are checked by validate() (InvalidArgument naming
// the field and the allowed range).
struct BlendParams {
  // CacheBlend: fraction of the reused documents' tokens recomputed in the layers after the
  // selection layers (0 = naive concatenation, 1 = every token: a full prefill). Default 0.15.
  double recompute_ratio = 0.15;
  // EPIC: leading tokens of every document not at the position it was computed at that are
  // recomputed in every layer (0 = naive concatenation). Default 16.
  int epic_k = 16;
  Status validate() const {
    RAGD_RETURN_IF_ERROR(kRangeRecomputeRatio.check("recompute_ratio", recompute_ratio));
    return kRangeEpicK.check("epic_k", epic_k);
  }
};

// A request's generation parameters, each field once. Unset = the default: on pipeline runs the
// spec's [generation] value for the fields a spec sets (max_tokens .. extractive), on plain runs and
// for the other fields the built-in one (engine::SamplingParams's, kDefaultMaxTokens). A set value
// wins even when it equals a default. resolve_run (run_params.h) turns it into the run's
// engine::SamplingParams, the one place defaults apply.
struct RunSampling {
  // Pipeline specs set these.
  std::optional<int> max_tokens;
  std::optional<float> temperature;
  std::optional<float> top_p;
  std::optional<int> top_k;  // sampling top-k (0 = off); not the passages retrieved (retrieval_top_k)
  std::optional<uint64_t> seed;
  std::optional<std::vector<std::string>> stop;
  std::optional<bool> extractive;  // [generation] extractive of the pipeline
  // Specs do not set these.
  std::optional<float> min_p;
  std::optional<float> repetition_penalty;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::vector<int32_t> stop_token_ids;  // in addition to the model's EOS; empty = none
  bool ignore_eos = false;
  std::shared_ptr<const engine::ConstraintSpec> constraint;  // null = unconstrained
};

// How a chat run may call the functions of RunRequest::tools (OpenAI's tool_choice).
struct ToolChoice {
  enum class Mode : uint8_t { kAuto, kNone, kRequired, kFunction };
  Mode mode = Mode::kAuto;
  std::string function;  // kFunction: the function the answer must call
};

struct RunRequest {
  std::string id;                 // request id (set by the daemon; logged on every line)
  std::string tenant = "default";
  std::string pipeline;           // "" = no retrieval (plain completion)
  std::string query;              // RAG question (pipeline runs)
  std::vector<engine::ChatMessage> messages;  // chat completions (template applied by executor)
  std::string prompt;             // raw completion prompt (used when messages empty and no pipeline)
  // Chat runs: functions the model may call (OpenAI's tools; the template shows them to the
  // model). Unless tool_choice is none, the answer is constrained to the model's tool-call format
  // (tool_constraint.h): auto = text or calls, required = calls, kFunction = one call of it;
  // parallel_tool_calls = false allows one call. Not with a pipeline, nor with another constraint.
  std::vector<engine::ToolDef> tools;
  ToolChoice tool_choice;
  bool parallel_tool_calls = true;
  // Plain completions: the prompt as token ids, used as given (no BOS added) in place of `prompt`
  // when non-empty. Every id must be in the tokenizer's vocabulary (InvalidArgument naming it).
  std::vector<int32_t> prompt_ids;
  int retrieval_top_k = -1;       // passages retrieved; -1 = pipeline default
  // lexical, dense or hybrid search; unset = the pipeline's ([retriever] mode), whose auto is the
  // corpus's default
  std::optional<retrieval::RetrievalMode> retrieval_mode;
  // Lexical searches: passages below this fraction of the first one's BM25 score are left out;
  // unset = the pipeline's ([retriever] min_score_ratio).
  std::optional<double> min_score_ratio;
  // Metadata filter of the searches (retrieval/metadata_filter.h's JSON form); "" = none. Parsed
  // (and refused with the key named) when the run is resolved.
  std::string filter_json;
  std::optional<ReuseMode> reuse; // unset = pipeline default (prefix for plain runs)
  std::optional<double> recompute_ratio;  // CacheBlend; unset = pipeline default (BlendParams)
  std::optional<int> epic_k;              // EPIC; unset = pipeline default (BlendParams)
  // Iterative pipelines: overrides of the spec's [iterative] overlap and retrieval_interval.
  std::optional<RetrievalOverlap> overlap;
  std::optional<int> retrieval_interval;
  // One-shot pipelines: override of the spec's [retriever] speculative_prefill.
  std::optional<bool> speculative_prefill;
  // Speculative decoding: draft tokens per decode step at most (n-gram drafts from the run's own
  // tokens); 0 = off; unset = RuntimeOptions::speculative.k.
  std::optional<int> speculative_k;
  // Speculative decoding's draft source and draft model (a directory the server loaded); unset =
  // the pipeline's, else the server's. A draft_model the server did not load is a 400.
  std::optional<DraftMethod> speculative_method;
  std::optional<std::string> draft_model;
  RunSampling sampling;  // generation parameters; unset ones take the spec's or built-in defaults
  // KV key scope: the tenant scope whose documents the prompt may hold; "" = shared. Runs of
  // different scopes never reuse each other's KV.
  std::string kv_scope;
  // The request's cache_salt (as vLLM accepts it): runs reuse each other's KV only when their salts
  // are equal too, at every tier, the remote one included; "" = none. The pipeline's own head
  // (server configuration) is shared across tenants and salts; documents never are.
  std::string cache_salt;
  bool want_logprobs = false;
  // With want_logprobs: also the logprobs of this many likeliest tokens at every step (0..20),
  // under the raw logits like the sampled token's (RunEvent::top_logprobs).
  int top_logprobs = 0;
  // Pipeline runs: a document id whose first chunk must be in the context. When retrieval did not
  // return it, it replaces the lowest-ranked chunk (evaluation with the gold passage forced in).
  std::string context_must_include;
  // Adaptive pipelines ([adapt], adapt_policy.h): a candidate's name forces it, "auto" (or unset)
  // lets the policy choose; an objective and a TTFT target (ms) in place of the pipeline's.
  std::optional<std::string> adapt;
  std::optional<AdaptObjective> adapt_objective;
  std::optional<double> slo_ttft_ms;
};

// A passage in a run's context, with what an application needs to cite it.
struct Source {
  std::string doc_id;
  uint64_t chunk_id = 0;
  float score = 0.0f;
  std::string snippet;               // the passage's first 240 bytes (cut at a UTF-8 boundary)
  std::string title;                 // the document's title
  std::string url;                   // the document's url ("" = none)
  std::vector<std::string> section;  // the passage's section path, outermost heading first
  uint32_t page = 0;                 // PDF page (1-based); 0 = not a page
  uint64_t byte_begin = 0;           // the passage's bytes [byte_begin, byte_end) of the document text
  uint64_t byte_end = 0;
};

struct Usage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  // prompt tokens whose KV was reused, by source tier (kvstore/tier.h; remote: the shared Redis tier)
  kvstore::TierCounts reused;
  int reused_tokens() const { return static_cast<int>(reused.total()); }
  int recomputed_tokens = 0;  // prompt tokens whose KV was computed in this run (incl. blend repairs)
  std::string reuse;          // the reuse mode the run used
  bool approximate = false;   // true when reused KV was blended (CacheBlend / EPIC): not a full prefill's
  int blended_tokens = 0;     // approximate modes: reused document tokens placed at a new position / context
  int repaired_tokens = 0;    // approximate modes: of those, tokens recomputed by the blend step
  double recompute_ratio = 0; // CacheBlend: the ratio used
  double recompute_ratio_floor = 0;  // CacheBlend: the loading controller's ratio (kv_blend.h), reported
  std::string reuse_note;     // why an approximate run fell back to exact reuse ("" = it did not)
  // Iterative runs (retrieval during generation).
  std::string overlap;          // the overlap mode ("" = a one-shot run)
  int searches = 0;             // real searches issued, the first one included
  int context_changes = 0;      // times the context changed after the first (sources events)
  int speculative_hits = 0;     // speculative / both: boundaries whose speculated context was right
  int speculative_misses = 0;   // ... and wrong
  int rollbacks = 0;            // wrong speculations that had been decoded under (the others waited)
  int rolled_back_tokens = 0;   // generated tokens discarded by rollbacks (never sent)
  // One-shot runs with speculative prefill: it ran (on candidates of an unfinished search), and how
  // often the candidates changed under it (each change recomputes from the first changed passage).
  bool speculative_prefill = false;
  int prefill_restarts = 0;
  // Sequence parallelism: the prompt was long enough to be split across this many workers (ring
  // prefill, sharded decode); 0 = one worker.
  int sp_workers = 0;
  // Of them, the workers that decoded it: fewer when the performance model made its KV move to the
  // first ones after the prefill (LongContextPolicy::plan); 0 = one worker.
  int sp_decode_workers = 0;
  // Of this run's KV, tokens that left rank 0's pool for host memory or SSD (seqparallel/kv_spill.h).
  int64_t kv_spilled_tokens = 0;
  // Speculative decoding: draft tokens verified, and of them accepted (each accepted one is a
  // token that cost no step of its own); verification steps.
  int drafted_tokens = 0, accepted_tokens = 0, draft_steps = 0;
  std::string draft_method;  // the run's draft source ("ngram", "draft"); "" = no speculative decoding
  // [semantic_cache] pipelines: "hit" (the answer is an earlier one's: nothing was prefilled or
  // decoded) or "miss"; "" = not used. A hit's cosine similarity and the earlier question.
  std::string semantic_cache;
  float semantic_similarity = 0;
  std::string semantic_question;
  // Adaptive pipelines: the configuration chosen for this run and why (usage.adapt).
  std::optional<AdaptReport> adapt;
};

struct Timings {
  double queue_ms = 0, retrieval_ms = 0, kv_load_ms = 0, prefill_ms = 0, ttft_ms = 0, tpot_ms = 0, total_ms = 0;
  // Where reuse spends its time (kv_load_ms = lookup_ms + admit_ms): the cache lookup (and start of
  // any DRAM / SSD load) on the retrieval thread, the admission (install of reused KV, blending),
  // and the publication of the prompt's new KV after the first token (never before it).
  double lookup_ms = 0, admit_ms = 0, publish_ms = 0;
  // Search time the run stood still for, the first search included: the search time not
  // overlapped with prefill or decoding (= retrieval_ms for a plain one-shot run).
  double search_wait_ms = 0;
  // Time the run waited for a retrieval thread after submit (the threads are shared fairly among
  // tenants; part of nothing else), and the time its passages took to rerank (rerank pipelines,
  // part of retrieval_ms; includes waiting for the reranker, which runs one scoring at a time).
  double retrieval_queue_ms = 0, rerank_ms = 0;
  // Approximate reuse (CacheBlend / EPIC), part of admit_ms and prefill_ms: computing the chunk
  // KV of documents seen for the first time, placing chunk KV (re-rotation + copy into the pool),
  // and the repair rows' share of the forward that ran them.
  double blend_chunk_ms = 0, blend_place_ms = 0, blend_repair_ms = 0;
};

// One of the likeliest tokens at a step (RunRequest::top_logprobs).
struct TokenLogprob {
  int32_t token_id = -1;
  std::string bytes;  // the token's raw bytes (may be part of a UTF-8 character)
  float logprob = 0.0f;
};

struct RunEvent {
  enum class Kind : uint8_t { kSources, kToken, kDone, kError };
  Kind kind = Kind::kToken;
  std::vector<Source> sources;  // kSources
  int from_token = 0;           // kSources: index of the first generated token this context applies to
  int index = 0;                // kToken: index of the generated token
  int32_t token_id = -1;        // kToken
  std::string text;             // kToken: newly completed UTF-8 text (may be empty)
  float logprob = 0.0f;         // kToken
  std::vector<TokenLogprob> top_logprobs;  // kToken: the likeliest tokens, best first (top_logprobs)
  std::string finish_reason;    // kDone: "stop" | "length" | "cancelled"
  Usage usage;                  // kDone
  Timings timings;              // kDone
  Status error;                 // kError
};

// Returns false to cancel the run (e.g. the client went away).
using EventSink = std::function<bool(const RunEvent&)>;

struct PipelineInfo {
  std::string name;
  std::string description;
  std::string reuse;  // reuse mode name
  int top_k = 4;
  std::string index;  // FAISS factory string
  int max_tokens = 256;
  bool number_passages = false;   // [prompt] number_passages: passage n starts "[n] " (sources[n-1])
  bool sources_footer = false;    // [prompt] sources_footer: OpenAI answers end with their sources
  std::string kind = "one_shot";  // one_shot | iterative
  std::string overlap;            // iterative: the default overlap mode
  int retrieval_interval = 0;     // iterative: generated tokens between retrievals
  // Adaptive pipelines ([adapt]): the candidates' names (what a run's `adapt` may name) and the
  // objective; empty = not adaptive.
  std::vector<std::string> adapt_candidates;
  std::string adapt_objective;
  double adapt_slo_ttft_ms = 0;
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Validates and queues a run. InvalidArgument / NotFound (unknown pipeline) / ResourceExhausted
  // (queue full) are returned synchronously and no events follow.
  virtual Status submit(RunRequest req, EventSink sink) = 0;
  virtual void cancel(const std::string& request_id) = 0;
  virtual std::vector<PipelineInfo> pipelines() const = 0;
  virtual bool ready() const = 0;
  virtual std::string model_name() const = 0;
  // How the model writes tool calls (its template's format; hermes for built-in chatml), so that
  // answers can be read back (engine::parse_tool_calls / ToolCallStream).
  virtual engine::ToolCallFormat tool_call_format() const { return *engine::tool_call_format("hermes"); }
  // Cache, scheduler and reuse stats (for /v1/cache/stats and /metrics).
  virtual ExecutorStats stats() const = 0;
  std::string stats_json() const { return stats().to_json(); }
};

}  // namespace ragd::pipelines
