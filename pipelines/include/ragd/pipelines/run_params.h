// Per-request run parameters, each declared once, for every route.
//
// A run body — ragd's (POST /v1/pipelines/{name}/runs, the WebSocket `run` message) or OpenAI's
// (/v1/chat/completions, /v1/completions) — sets fields of a RunRequest; run_param_defs() lists
// every such field with its JSON name on each route, its JSON type, its range, where its default
// comes from and what it does. The table is the only place a range is written:
//   - the daemon decodes run bodies of both APIs by walking it (daemon/src/run_param_decode.h:
//     type check, range check, the 400 message that names the field and its range or choices, the
//     allow-list of fields);
//   - the pipeline spec parser and the executor check the same ranges (kRange* constants);
//   - docs/api.md's parameter rows are checked against run_param_doc_rows() by a test.
// The executor turns (request, pipeline spec) into one immutable ResolvedRun (resolve_run,
// pipelines/src/run_params.cpp): every default is applied there and nowhere else.
//
// Adding a request field: one row here (its name on each route that takes it, plus the RunRequest
// member it sets) and its use.
//
// Header-only: the daemon's HTTP layer uses the table without linking the pipelines library.
// Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>
#include <memory>

#include "ragd/common/echo.h"
#include "ragd/common/status.h"
#include "ragd/common/utf8.h"
#include "ragd/engine/constraint_spec.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/param_range.h"
#include "ragd/retrieval/metadata_filter.h"

namespace ragd::pipelines {

struct PipelineSpec;  // pipeline_spec.h

// Defaults that are not a pipeline spec's.
inline constexpr int kDefaultMaxTokens = 256;                       // plain runs (and PipelineSpec)
inline constexpr ReuseMode kDefaultPlainRunReuse = ReuseMode::kPrefix;  // runs without documents
inline constexpr ReuseMode kDefaultPipelineReuse = ReuseMode::kKnowledgeTree;  // PipelineSpec::reuse

enum class ParamType : uint8_t { kInt, kNumber, kBool, kString, kStringList, kSeed, kEnum, kObject, kTokenIds };

// A decoded JSON value: kInt int64_t, kNumber double, kBool bool, kString / kEnum string,
// kStringList vector<string>, kSeed uint64_t (-1 already turned into a random seed), kObject a
// JSON object as its minified text (string; the row's consumer parses it), kTokenIds
// vector<int32_t> (an array of integers 0..INT32_MAX).
using ParamValue =
    std::variant<int64_t, double, bool, std::string, std::vector<std::string>, uint64_t, std::vector<int32_t>>;

// The two APIs whose bodies carry run parameters.
enum class RunRoute : uint8_t {
  kRagd,    // pipeline runs (POST /v1/pipelines/{name}/runs) and the WebSocket `run` message
  kOpenAi,  // /v1/chat/completions and /v1/completions
};
inline constexpr RunRoute kRunRoutes[] = {RunRoute::kRagd, RunRoute::kOpenAi};

// A row's JSON name on each route; "" = not a field of that route. The same name may mean
// different fields on the two routes: "top_k" of a ragd run is the passages retrieved (OpenAI
// "retrieval_top_k"), "top_k" of an OpenAI body is sampling top-k (not a ragd run field).
struct ParamNames {
  std::string_view ragd;
  std::string_view openai;
};
constexpr ParamNames on_both(std::string_view name) { return {name, name}; }
constexpr ParamNames ragd_only(std::string_view name) { return {name, {}}; }
constexpr ParamNames openai_only(std::string_view name) { return {{}, name}; }

// The routes a row is decoded on: bit (1 << RunRoute). Derived from the names, so the two never
// disagree.
using RouteMask = uint8_t;
constexpr RouteMask route_bit(RunRoute r) { return static_cast<RouteMask>(1u << static_cast<unsigned>(r)); }

struct ParamDef {
  ParamNames names;
  ParamType type;
  ParamRange range{};             // kInt / kNumber
  // kEnum: the choices "a | b | c" (the error and the docs list them), from the enum's own name
  // table (common/enum_names.h: enum_choices), so they never drift from what the parser takes.
  std::string (*choices)() = nullptr;
  std::string_view default_doc;   // where the default comes from (docs)
  std::string_view doc;           // what it does (docs)
  // Stores a decoded, type- and range-checked value into the request. kEnum: InvalidArgument
  // for a name that is not one of `choices` (set_run_param words the 400 message).
  Status (*set)(RunRequest&, const ParamValue&);

  // The field's JSON name on `route`; "" = not a field there.
  constexpr std::string_view name(RunRoute route) const { return route == RunRoute::kRagd ? names.ragd : names.openai; }
  constexpr RouteMask routes() const {
    return static_cast<RouteMask>((names.ragd.empty() ? 0 : route_bit(RunRoute::kRagd)) |
                                  (names.openai.empty() ? 0 : route_bit(RunRoute::kOpenAi)));
  }
  constexpr bool on(RunRoute route) const { return (routes() & route_bit(route)) != 0; }
  // kEnum: the choices one name each, in order (empty for other types).
  std::vector<std::string> choice_names() const {
    std::vector<std::string> out;
    const std::string all = choices ? choices() : std::string();
    for (size_t b = 0, e; b < all.size(); b = e + 3) {
      e = all.find(" | ", b);
      if (e == std::string::npos) e = all.size();
      out.push_back(all.substr(b, e - b));
    }
    return out;
  }
};

// Every field of a run body that sets a run parameter, on either route (route fields such as
// `query`, `stream`, `tenant`, `pipeline`, OpenAI's `messages`, `n`, `logprobs`, `tools` and
// `response_format` are the daemon's). Rows are decoded in this order.
std::span<const ParamDef> run_param_defs();
// The row whose JSON name on `route` is `name`; null = not a run parameter of that route.
const ParamDef* find_run_param(RunRoute route, std::string_view name);
// Stores `value` into `req` by row `d` (d.set), the value read under d's name on `route`. A refusal
// is InvalidArgument whose message names the field: the row's own (e.g. cache_salt's length), or
// for kEnum "field 'NAME' must be one of a | b | c; got 'VALUE'".
Status set_run_param(const ParamDef& d, RunRoute route, RunRequest& req, const ParamValue& value);
// The rows of docs/api.md's run parameter table (the ragd route's fields), one per ParamDef there
// ("| `name` | type | default | range; doc |").
std::string run_param_doc_rows();

// A run with every parameter resolved (defaults applied, ranges checked). Immutable once made.
struct ResolvedRun {
  const PipelineSpec* spec = nullptr;  // null: a plain run (no retrieval)
  int retrieval_k = 0;                 // passages retrieved (0: none)
  retrieval::RetrievalMode retrieval_mode = retrieval::RetrievalMode::kAuto;  // kAuto: the corpus's
  double min_score_ratio = 0;          // lexical and weighted hybrid searches: the cut of weak passages (PipelineSpec; < 0: the ranking's default)
  std::shared_ptr<const retrieval::MetadataFilter> filter;  // the request's filter; null = none
  engine::SamplingParams sampling;
  ReuseMode reuse = kDefaultPlainRunReuse;
  BlendParams blend;
  std::optional<IterativeParams> iterative;  // set: an iterative pipeline
  bool speculative_prefill = false;  // effective: a one-shot, non-reranking run without a forced document
  bool extractive = false;
  // Speculative decoding's draft source and draft model: the request's, else the pipeline's
  // (unset / "": the server's, applied by the executor). A draft_model implies method draft.
  std::optional<DraftMethod> speculative_method;
  std::string draft_model;
  int rerank = 0;  // one-shot runs: passages kept after model reranking (0 = none)
  // Adaptive pipelines: what the run may choose from and aims for. Until the choice is applied
  // (apply_adapt_choice) retrieval_k is the largest candidate's top_k (what the search fetches,
  // allowed or not, so that the signals do not depend on the request's narrowing); the choice then
  // sets retrieval_k, rerank, extractive and the retrieval interval. With context_must_include the
  // document is placed among those passages, so a candidate with a smaller top_k may drop it.
  std::optional<AdaptGoal> adapt;
};

// Resolves `req` against its pipeline's spec (null for a plain run): the one place where request
// values, spec values and built-in defaults meet. InvalidArgument naming the field on a bad
// combination or range.
Result<ResolvedRun> resolve_run(const RunRequest& req, const PipelineSpec* spec);
// Completes an adaptive run's resolution with the chosen candidate (run.spec->adapt's).
void apply_adapt_choice(ResolvedRun& run, const AdaptCandidate& chosen);

// ---- implementation (header-only, see above) ----

namespace detail {

template <class T>
const T& param_as(const ParamValue& v) {
  return std::get<T>(v);
}

// guided_json / guided_regex / guided_choice: the run's constraint (one of them at most).
inline Status set_constraint(RunRequest& r, const char* kind, std::string source, std::vector<std::string> choices) {
  if (r.sampling.constraint) return Status::InvalidArgument("only one of guided_json, guided_regex and guided_choice may be given");
  engine::ConstraintSpec c;
  c.kind = kind;
  c.source = std::move(source);
  c.choices = std::move(choices);
  c.origin = c.kind == "json_schema" ? "guided_json" : c.kind == "regex" ? "guided_regex" : "guided_choice";
  r.sampling.constraint = std::make_shared<const engine::ConstraintSpec>(std::move(c));
  return Status::OK();
}

inline constexpr ParamDef kRunParamDefs[] = {
    {{"top_k", "retrieval_top_k"}, ParamType::kInt, kRangeRetrievalTopK, {}, "pipeline's",
     "passages retrieved (the same range as OpenAI `retrieval_top_k`)",
     [](RunRequest& r, const ParamValue& v) {
       r.retrieval_top_k = static_cast<int>(param_as<int64_t>(v));
       return Status::OK();
     }},
    {on_both("retrieval_mode"), ParamType::kEnum, {}, [] { return enum_choices<retrieval::RetrievalMode>(); }, "pipeline's (auto: the corpus's)",
     "how passages are searched: BM25 over words (lexical), the embedder's vectors (dense), both fused "
     "(hybrid: a weighted sum of BM25 and cosine); auto = hybrid with a semantic embedder (the term vectors of "
     "new corpora, an encoder, the model), lexical with the hashing embedder "
     "([design/retrieval.md](design/retrieval.md))",
     [](RunRequest& r, const ParamValue& v) {
       Result<retrieval::RetrievalMode> m = parse_enum<retrieval::RetrievalMode>(param_as<std::string>(v));
       if (!m.ok()) return m.status();
       r.retrieval_mode = *m;
       return Status::OK();
     }},
    {on_both("min_score_ratio"), ParamType::kNumber, kRangeScoreRatio, {}, "pipeline's (0.6 lexical, 0.7 hybrid)",
     "lexical and hybrid (weighted fusion) searches: passages whose score (BM25, or the fused score) is below this "
     "fraction of the first one's are left out of the prompt (the first always stays); 0 keeps all top_k. Dense "
     "searches, rrf fusion, reranked and adaptive runs keep all ([pipelines.md](pipelines.md#retriever))",
     [](RunRequest& r, const ParamValue& v) {
       r.min_score_ratio = param_as<double>(v);
       return Status::OK();
     }},
    {on_both("filter"), ParamType::kObject, {}, {}, "none",
     "only passages of documents whose metadata match, applied inside the search (a filtered top-k holds k passages "
     "when k qualify): `{\"lang\": \"en\", \"year\": {\"gte\": 2020}, \"tags\": {\"in\": [\"a\", \"b\"]}}`; "
     "keys are metadata keys or `format`, `page`, `path`; operators eq, in, gt, gte, lt, lte "
     "([design/retrieval.md](design/retrieval.md)); a malformed filter is a 400 naming the key",
     [](RunRequest& r, const ParamValue& v) {
       r.filter_json = param_as<std::string>(v);
       return Status::OK();
     }},
    {on_both("max_tokens"), ParamType::kInt, kRangeMaxTokens, {}, "pipeline's (256)", "tokens generated at most",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.max_tokens = static_cast<int>(param_as<int64_t>(v));
       return Status::OK();
     }},
    {openai_only("max_completion_tokens"), ParamType::kInt, kRangeMaxTokens, {}, "max_tokens",
     "OpenAI's newer name for max_tokens; wins when both are given",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.max_tokens = static_cast<int>(param_as<int64_t>(v));
       return Status::OK();
     }},
    {on_both("temperature"), ParamType::kNumber, kRangeTemperature, {}, "pipeline's (0 = greedy)",
     "an explicit value always wins over the pipeline's",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.temperature = static_cast<float>(param_as<double>(v));
       return Status::OK();
     }},
    {on_both("top_p"), ParamType::kNumber, kRangeTopP, {}, "pipeline's (1)", "nucleus sampling",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.top_p = static_cast<float>(param_as<double>(v));
       return Status::OK();
     }},
    {openai_only("top_k"), ParamType::kInt, kRangeSamplingTopK, {}, "pipeline's (0 = off)",
     "sampling top-k: draw among the k likeliest tokens (a ragd run's `top_k` is the passages retrieved)",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.top_k = static_cast<int>(param_as<int64_t>(v));
       return Status::OK();
     }},
    {on_both("min_p"), ParamType::kNumber, kRangeMinP, {}, "0 (off)",
     "drop tokens whose probability is below min_p times the most likely token's",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.min_p = static_cast<float>(param_as<double>(v));
       return Status::OK();
     }},
    {openai_only("presence_penalty"), ParamType::kNumber, kRangePresencePenalty, {}, "0 (off)",
     "subtracted once from the logit of every token already generated",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.presence_penalty = static_cast<float>(param_as<double>(v));
       return Status::OK();
     }},
    {openai_only("frequency_penalty"), ParamType::kNumber, kRangeFrequencyPenalty, {}, "0 (off)",
     "subtracted from a token's logit once per time it was generated",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.frequency_penalty = static_cast<float>(param_as<double>(v));
       return Status::OK();
     }},
    {openai_only("repetition_penalty"), ParamType::kNumber, kRangeRepetitionPenalty, {}, "1 (off)",
     "vLLM's: the logits of tokens already seen are divided (positive) or multiplied (negative) by it",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.repetition_penalty = static_cast<float>(param_as<double>(v));
       return Status::OK();
     }},
    {on_both("seed"), ParamType::kSeed, {}, {}, "pipeline's (0)",
     "0..2^64-1, or -1 = a random seed drawn for this request (as in llama.cpp); other values 400. The same rule "
     "on the OpenAI routes",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.seed = param_as<uint64_t>(v);
       return Status::OK();
     }},
    {on_both("stop"), ParamType::kStringList, {}, {}, "pipeline's (none)", "stop strings (a string or an array of strings)",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.stop = param_as<std::vector<std::string>>(v);
       return Status::OK();
     }},
    {openai_only("stop_token_ids"), ParamType::kTokenIds, {}, {}, "none",
     "vLLM's: generation also ends at these token ids",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.stop_token_ids = param_as<std::vector<int32_t>>(v);
       return Status::OK();
     }},
    {ragd_only("reuse"), ParamType::kEnum, {}, [] { return enum_choices<ReuseMode>(); }, "pipeline's",
     "where the prompt's KV comes from; `cacheblend` and `epic` are approximate (see below); `auto` picks, per model, "
     "the fastest approximate mode whose reuse self-check passes, else exact (its choice in `usage.reuse_note`)",
     [](RunRequest& r, const ParamValue& v) {
       Result<ReuseMode> m = parse_reuse_mode(param_as<std::string>(v));
       if (!m.ok()) return m.status();
       r.reuse = *m;
       return Status::OK();
     }},
    {ragd_only("recompute_ratio"), ParamType::kNumber, kRangeRecomputeRatio, {}, "pipeline's (0.15)",
     "`cacheblend`: fraction of the placed documents' tokens recomputed (0 = naive concatenation, 1 = full prefill)",
     [](RunRequest& r, const ParamValue& v) {
       r.recompute_ratio = param_as<double>(v);
       return Status::OK();
     }},
    {ragd_only("epic_k"), ParamType::kInt, kRangeEpicK, {}, "pipeline's (16)", "`epic`: leading tokens recomputed per displaced document",
     [](RunRequest& r, const ParamValue& v) {
       r.epic_k = static_cast<int>(param_as<int64_t>(v));
       return Status::OK();
     }},
    {ragd_only("overlap"), ParamType::kEnum, {}, [] { return enum_choices<RetrievalOverlap>(); }, "pipeline's",
     "iterative pipelines only (400 otherwise): how searches during generation overlap with decoding "
     "([design/iterative.md](design/iterative.md))",
     [](RunRequest& r, const ParamValue& v) {
       Result<RetrievalOverlap> o = parse_overlap(param_as<std::string>(v));
       if (!o.ok()) return o.status();
       r.overlap = *o;
       return Status::OK();
     }},
    {ragd_only("retrieval_interval"), ParamType::kInt, kRangeRetrievalInterval, {}, "pipeline's",
     "iterative pipelines only: generated tokens between retrievals",
     [](RunRequest& r, const ParamValue& v) {
       r.retrieval_interval = static_cast<int>(param_as<int64_t>(v));
       return Status::OK();
     }},
    {ragd_only("speculative_prefill"), ParamType::kBool, {}, {}, "pipeline's (false)",
     "one-shot pipelines over an IVF index: start the prefill on the candidates of a progressive search (searched "
     "in the caller's scope like every search); on other indexes (Flat, HNSW, IVF still training), on reranking "
     "and iterative pipelines and with `context_must_include` the run is a plain one, with the same sources and "
     "output",
     [](RunRequest& r, const ParamValue& v) {
       r.speculative_prefill = param_as<bool>(v);
       return Status::OK();
     }},
    {ragd_only("extractive"), ParamType::kBool, {}, {}, "pipeline's (false)",
     "the answer is a verbatim span of the prompt (passages or question): each token is sampled among those that "
     "continue a copy of some run of prompt tokens, then a stop",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.extractive = param_as<bool>(v);
       return Status::OK();
     }},
    {ragd_only("guided_json"), ParamType::kObject, {}, {}, "none",
     "structured output: the answer is JSON valid against this JSON Schema (keywords and limits: "
     "[Structured output](#structured-output)); a keyword outside them is a 400 naming it. At most one `guided_*`",
     [](RunRequest& r, const ParamValue& v) { return set_constraint(r, "json_schema", param_as<std::string>(v), {}); }},
    {ragd_only("guided_regex"), ParamType::kString, {}, {}, "none",
     "structured output: the answer matches this regular expression as a whole (Python `re` subset, "
     "[Structured output](#structured-output))",
     [](RunRequest& r, const ParamValue& v) { return set_constraint(r, "regex", param_as<std::string>(v), {}); }},
    {ragd_only("guided_choice"), ParamType::kStringList, {}, {}, "none", "structured output: the answer is exactly one of these strings",
     [](RunRequest& r, const ParamValue& v) {
       return set_constraint(r, "choice", {}, param_as<std::vector<std::string>>(v));
     }},
    {ragd_only("logprobs"), ParamType::kBool, {}, {}, "false", "each token event carries its log-probability",
     [](RunRequest& r, const ParamValue& v) {
       r.want_logprobs = param_as<bool>(v);
       return Status::OK();
     }},
    {on_both("ignore_eos"), ParamType::kBool, {}, {}, "false", "extension: keep generating past end-of-sequence (load tests)",
     [](RunRequest& r, const ParamValue& v) {
       r.sampling.ignore_eos = param_as<bool>(v);
       return Status::OK();
     }},
    {on_both("speculative_k"), ParamType::kInt, kRangeSpeculativeK, {}, "the pipeline's (`[generation] speculative_k`), else the server's (`runtime.speculative_k`, 0)",
     "speculative decoding: up to this many draft tokens per decode step, drafted from the run's own prompt and "
     "output (n-gram lookup) and verified in one step; the output is the same as without it (greedy and seeded "
     "sampling alike); 0 = off",
     [](RunRequest& r, const ParamValue& v) {
       r.speculative_k = static_cast<int>(param_as<int64_t>(v));
       return Status::OK();
     }},
    {on_both("speculative_method"), ParamType::kEnum, {}, [] { return enum_choices<DraftMethod>(); },
     "the pipeline's (`[generation] speculative.method`), else the server's (`runtime.speculative_method`, ngram)",
     "speculative decoding's draft source: `ngram` drafts from the run's own prompt and output, `draft` from a small "
     "draft model sharing the serving model's tokenizer (`draft_model`); either way the output is the same as "
     "without drafts",
     [](RunRequest& r, const ParamValue& v) {
       Result<DraftMethod> m = parse_draft_method(param_as<std::string>(v));
       if (!m.ok()) return m.status();
       r.speculative_method = *m;
       return Status::OK();
     }},
    {on_both("draft_model"), ParamType::kString, {}, {}, "the pipeline's, else the server's (`runtime.speculative_draft_model`)",
     "speculative decoding with `speculative_method` `draft`: the draft model, one of the directories the server "
     "loaded at start (its own or a pipeline's); another is a 400 naming the loaded ones. Implies `draft`",
     [](RunRequest& r, const ParamValue& v) {
       const std::string& s = param_as<std::string>(v);
       if (s.empty() || s.size() > 4096) return Status::InvalidArgument("draft_model must be 1..4096 characters");
       r.draft_model = s;
       return Status::OK();
     }},
    {on_both("cache_salt"), ParamType::kString, {}, {}, "none",
     "scopes KV reuse: runs reuse each other's document KV (every tier, the shared remote one included) only "
     "when their tenant and cache_salt are equal; the pipeline's own system prompt is shared. 1..256 characters "
     "(Unicode code points, not bytes; a salt that is not valid UTF-8 is a 400 naming it)",
     [](RunRequest& r, const ParamValue& v) {
       const std::string& s = param_as<std::string>(v);
       // Characters as documented, not bytes: 256 of "é" are 512 bytes and within the limit.
       if (find_invalid_utf8(s) != std::string::npos) return Status::InvalidArgument("cache_salt is not valid UTF-8");
       if (s.empty() || utf8_length(s) > 256) return Status::InvalidArgument("cache_salt must be 1..256 characters");
       r.cache_salt = s;
       return Status::OK();
     }},
    {ragd_only("context_must_include"), ParamType::kString, {}, {}, "none",
     "extension (evaluation): a document id whose first chunk is put in the context, replacing the lowest-ranked "
     "retrieved chunk unless retrieval returned it; the caller's own or a shared document, else 400 "
     "`invalid_request` (\"context_must_include: no document 'ID'\"; another tenant's document reads as missing)",
     [](RunRequest& r, const ParamValue& v) {
       r.context_must_include = param_as<std::string>(v);
       return Status::OK();
     }},
    {ragd_only("adapt"), ParamType::kString, {}, {}, "\"auto\"",
     "adaptive pipelines only (400 otherwise): a candidate's name from the pipeline's `[adapt]` table forces that "
     "configuration (400 for a name that is not one), `auto` lets the policy choose per query; `top_k`, "
     "`extractive` and `retrieval_interval` narrow the candidates to those with that value (400 when none has it). "
     "The choice and why: `usage.adapt`",
     [](RunRequest& r, const ParamValue& v) {
       const std::string& s = param_as<std::string>(v);
       if (s.empty() || s.size() > 64) return Status::InvalidArgument("adapt must be 1..64 characters");
       r.adapt = s;
       return Status::OK();
     }},
    {ragd_only("adapt_objective"), ParamType::kEnum, {}, [] { return enum_choices<AdaptObjective>(); }, "pipeline's `[adapt]` (balanced)",
     "adaptive pipelines only: `quality` takes the best estimated answer, `balanced` the fastest candidate within "
     "the pipeline's quality tolerance of the best, `latency` the best one predicted within `slo_ttft_ms`",
     [](RunRequest& r, const ParamValue& v) {
       Result<AdaptObjective> o = parse_enum<AdaptObjective>(param_as<std::string>(v));
       if (!o.ok()) return o.status();
       r.adapt_objective = *o;
       return Status::OK();
     }},
    {ragd_only("slo_ttft_ms"), ParamType::kNumber, kRangeSloTtftMs, {}, "pipeline's `[adapt]` (none)",
     "adaptive pipelines only: time-to-first-token target in ms (`latency` needs one; `balanced` keeps to it when a "
     "candidate is predicted to)",
     [](RunRequest& r, const ParamValue& v) {
       r.slo_ttft_ms = param_as<double>(v);
       return Status::OK();
     }},
};

inline std::string param_range_doc(const ParamDef& d) {
  const auto num = param_number;
  switch (d.type) {
    case ParamType::kInt: return num(d.range.lo) + ".." + num(d.range.hi);
    case ParamType::kNumber:
      return d.range.lo > 0 && d.range.lo < 1e-6 ? "(0, " + num(d.range.hi) + "]" : num(d.range.lo) + ".." + num(d.range.hi);
    default: return {};
  }
}

}  // namespace detail

inline std::span<const ParamDef> run_param_defs() { return detail::kRunParamDefs; }

inline const ParamDef* find_run_param(RunRoute route, std::string_view name) {
  if (name.empty()) return nullptr;
  for (const ParamDef& d : detail::kRunParamDefs)
    if (d.name(route) == name) return &d;
  return nullptr;
}

inline Status set_run_param(const ParamDef& d, RunRoute route, RunRequest& req, const ParamValue& value) {
  Status st = d.set(req, value);
  if (st.ok() || d.type != ParamType::kEnum) return st;
  const std::string name(d.name(route));
  const std::string got = std::holds_alternative<std::string>(value) ? std::get<std::string>(value) : std::string();
  return Status::InvalidArgument("field '" + name + "' must be one of " + d.choices() + "; got '" + clip_input(got) + "'");
}

inline std::string run_param_doc_rows() {
  std::string out;
  for (const ParamDef& d : detail::kRunParamDefs) {
    if (!d.on(RunRoute::kRagd)) continue;
    std::string type;
    switch (d.type) {
      case ParamType::kInt: type = "int"; break;
      case ParamType::kNumber: type = "number"; break;
      case ParamType::kBool: type = "bool"; break;
      case ParamType::kString: type = "string"; break;
      case ParamType::kStringList: type = "string or [string]"; break;
      case ParamType::kSeed: type = "int"; break;
      case ParamType::kObject: type = "object"; break;
      case ParamType::kTokenIds: type = "[int]"; break;
      case ParamType::kEnum: {
        std::string c = d.choices();
        for (size_t at = c.find(" | "); at != std::string::npos; at = c.find(" | ")) c.replace(at, 3, "` / `");
        type = "`" + c + "`";
        break;
      }
    }
    const std::string range = detail::param_range_doc(d);
    out += "| `" + std::string(d.names.ragd) + "` | " + type + " | " + std::string(d.default_doc) + " | " +
           (range.empty() ? "" : range + "; ") + std::string(d.doc) + " |\n";
  }
  return out;
}

}  // namespace ragd::pipelines
