// Per-query RAG configuration under load (METIS, SOSP 2025): a pipeline's [adapt] table lists
// candidate configurations (passages retrieved, model reranking kept-N, extractive answers, the
// retrieval interval of an iterative pipeline) and an objective. For each query the policy
//   1. profiles it from signals that cost nothing next to generation: the retrieval score margin
//      between the first two passages, whether a lexical overlap score (a cheap reranker) ranks the
//      retriever's first passage first too, the lexical margin, the question's length;
//   2. estimates each allowed candidate's chance of a right answer from those signals (one logistic
//      model per candidate, fitted offline by `ragctl eval --fit-adapt`) and its time to first
//      token from the load the scheduler reports (runs ahead, the prefill and reranking work they
//      still have, free KV blocks, the step token budget): a mean, and a high quantile (p99 by
//      default) when the profile has the fitted quantile model;
//   3. chooses by the objective: `quality` the best estimate; `balanced` the fastest of those within
//      `quality_tolerance` of the best; `latency` the best of those whose predicted TTFT quantile is
//      within `slo_ttft_ms`.
// With an SLO, `balanced` also keeps to it when any candidate can. When none can, the fastest one.
// The SLO is checked against the quantile (a tail target), the mean orders candidates by speed.
//
// Everything here is a pure function of typed inputs: the executor gathers the signals and the
// load (executor_adapt.cpp) and applies the choice (apply_adapt_choice, run_params.h).
// Thread-safety: value types and pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"

namespace ragd::pipelines {

enum class AdaptObjective : uint8_t { kQuality, kBalanced, kLatency };
inline constexpr auto kAdaptObjectiveNames = make_enum_names<AdaptObjective>(
    "objective", {{AdaptObjective::kQuality, "quality"},
                  {AdaptObjective::kBalanced, "balanced"},
                  {AdaptObjective::kLatency, "latency"}});
constexpr const auto& ragd_enum_names(AdaptObjective) { return kAdaptObjectiveNames; }

// One candidate configuration of an adaptive pipeline.
struct AdaptCandidate {
  std::string name;            // unique within the pipeline; usage.adapt and /metrics name it
  int top_k = 1;               // passages retrieved (1..64)
  int rerank = 0;              // > 0: rerank the top_k with the model, keep this many (<= top_k)
  bool extractive = false;     // answers copied verbatim from the prompt
  int retrieval_interval = 0;  // iterative pipelines: generated tokens between retrievals; 0 = the pipeline's
  // Priors used until a fitted profile names this candidate: chance of a right answer (0..1) and
  // time to first token with nothing ahead (ms). Unset: 0.5 and 10 ms per passage prefilled or
  // scored.
  std::optional<double> prior_quality, prior_ttft_ms;
};

// The signals of one query, in the order of AdaptModel::quality's weights.
inline constexpr size_t kNumAdaptSignals = 4;
inline constexpr std::array<std::string_view, kNumAdaptSignals> kAdaptSignalNames = {
    "score_margin", "lexical_agreement", "lexical_margin", "question_tokens"};

// What the pipeline's recent runs for this tenant showed (AdaptHistory, adapt_history.h): part of the
// per-query profile, reported in usage.adapt. Zero counts: no history yet.
struct AdaptHistorySignals {
  int64_t runs = 0;      // runs of this tenant and pipeline recorded (first token seen)
  int64_t reranked = 0;  // runs that reranked their passages
  // Of the reranked runs, the fraction whose kept passage was the retriever's first: then the
  // one-passage candidate's prompt, and so its greedy answer, would have been the same. 0 when none.
  double rerank_agreement = 0;
  // Recent runs whose TTFT exceeded their predicted quantile or their target (exponentially
  // weighted, 0..1), and the correction the policy multiplies predicted quantiles by (>= 1; 1 =
  // calibrated or off): raised after each exceedance, lowered slowly while TTFTs stay under
  // (adaptive calibration, adapt_history.h).
  double ttft_exceed_rate = 0;
  double ttft_scale = 1;
};

struct QuerySignals {
  bool retrieved = false;     // false: chosen before any search (iterative pipelines); the
                              // retrieval signals are then 0
  double score_margin = 0;    // retriever score of passage 1 minus passage 2 (0 with < 2 passages)
  double lexical_agreement = 0;  // 1: the lexical overlap score ranks the retriever's first passage first
  double lexical_margin = 0;  // lexical overlap of its best passage minus its second (0..1)
  int question_tokens = 0;
  double passage_tokens = 0;  // mean tokens per retrieved passage (prompt size estimate)
  AdaptHistorySignals history;  // this tenant's and pipeline's recent runs (not a fitted feature)
  std::array<double, kNumAdaptSignals> features() const {
    return {score_margin, lexical_agreement, lexical_margin, static_cast<double>(question_tokens)};
  }
};

// The serving load when the choice is made (scheduler and executor state).
struct LoadSignals {
  int ahead = 0;              // runs in retrieval or prompt building, queued, waiting or running
  int running = 0;            // runs in the running batch
  int64_t free_blocks = -1;   // free engine KV blocks (-1 = unknown: not checked)
  int block_size = 16;        // tokens per KV block
  int max_batch_tokens = 512; // tokens the scheduler feeds per step
  // Prefill and reranking tokens the adaptive runs ahead still have before their first token
  // (adapt_work_tokens of each one's chosen candidate), the queued work behind which this run waits.
  double work_ahead_tokens = 0;
};

// One candidate's fitted model (ragctl eval --fit-adapt).
struct AdaptModel {
  // P(right answer) = sigmoid(quality[0] + sum_i quality[i + 1] * signal_i), signals as
  // QuerySignals::features().
  std::array<double, kNumAdaptSignals + 1> quality{};
  double ttft_idle_ms = 0;     // time to first token with nothing ahead
  double ttft_per_run_ms = 0;  // added per run ahead
  // The TTFT quantile (AdaptProfile::ttft_quantile) under load: ttft_q[0] + ttft_q[1] * runs ahead
  // + ttft_q[2] * (work ahead / 1000 tokens), in ms; set only when has_ttft_q.
  std::array<double, 3> ttft_q{};
  bool has_ttft_q = false;
  int fit_samples = 0;         // questions it was fitted on
  double fit_accuracy = 0;     // their exact match
};

// Fitted parameters of an adaptive pipeline, by candidate name; stored beside the pipeline spec
// (a TOML file, adapt_profile_toml) and loaded with it.
struct AdaptProfile {
  std::map<std::string, AdaptModel> models;
  std::string source;  // what it was fitted on (informational)
  // The quantile (0..1, e.g. 0.99) every model's ttft_q predicts; 0 = none (profiles fitted before
  // the quantile model: the SLO is then checked against the mean).
  double ttft_quantile = 0;
};
// Parses a profile file; InvalidArgument naming the file and the key.
Result<AdaptProfile> parse_adapt_profile(std::string_view toml_text, std::string_view source_name);
std::string adapt_profile_toml(const AdaptProfile& p);

// A pipeline's [adapt] table.
struct AdaptSpec {
  std::vector<AdaptCandidate> candidates;  // never empty
  AdaptObjective objective = AdaptObjective::kBalanced;
  double slo_ttft_ms = 0;         // > 0: a TTFT target; 0 = none (objective latency needs one)
  double quality_tolerance = 0.02;  // balanced: estimates this close to the best count as equal
  std::string profile_file;       // the fitted profile's file (the spec's directory), "" = none
  AdaptProfile profile;           // fitted models; candidates it lacks use their priors

  const AdaptCandidate* find(std::string_view name) const;
};

// What a run may choose from and aims for, after the request's overrides.
struct AdaptGoal {
  AdaptObjective objective = AdaptObjective::kBalanced;
  double slo_ttft_ms = 0;
  double quality_tolerance = 0.02;
  std::vector<size_t> allowed;  // indices into AdaptSpec::candidates, never empty
  bool forced = false;          // the request named one candidate (allowed has one entry)
};

struct AdaptEstimate {
  size_t index = 0;          // into AdaptSpec::candidates
  double quality = 0;        // P(right answer)
  double ttft_ms = 0;        // predicted mean under the current load
  double ttft_q_ms = 0;      // predicted TTFT quantile (the profile's ttft_quantile; the mean without one)
  double work_tokens = 0;    // prefill and reranking tokens before its first token (adapt_work_tokens)
  bool fits_kv = true;       // its prompt fits the free KV blocks now
  bool fitted = false;       // from the fitted profile (false: the candidate's priors)
};

struct AdaptChoice {
  size_t index = 0;  // into AdaptSpec::candidates
  // Why, as a code: forced | best_quality | cheapest_near_best | best_within_slo | fastest_over_slo
  std::string reason;
  std::vector<AdaptEstimate> estimates;  // one per allowed candidate, in AdaptGoal::allowed order
  const AdaptEstimate& chosen() const;
};

// What a run reports of its choice (usage.adapt).
struct AdaptReport {
  std::string pipeline;
  std::string choice;     // the chosen candidate's name
  std::string reason;     // AdaptChoice::reason
  std::string objective;  // the objective the run used
  double slo_ttft_ms = 0;
  double ttft_quantile = 0;  // what ttft_q_ms predicts (0: the mean, no quantile model)
  QuerySignals signals;
  LoadSignals load;
  // Every allowed candidate's estimate, with its name.
  std::vector<std::pair<std::string, AdaptEstimate>> estimates;
};
AdaptReport adapt_report(const AdaptSpec& spec, std::string pipeline, const AdaptGoal& goal, const AdaptChoice& choice,
                         const QuerySignals& q, const LoadSignals& load);

// Tokens a run of candidate `c` computes before its first token: the prompt's prefill and, when it
// reranks, one scoring pass per reranked passage (question and passage). Estimated from the
// query's signals (mean passage length); the unit of LoadSignals::work_ahead_tokens.
double adapt_work_tokens(const AdaptCandidate& c, const QuerySignals& q);

// The model a candidate is estimated with: its fitted one, else one made from its priors.
AdaptModel adapt_model(const AdaptSpec& spec, size_t index, bool* fitted = nullptr);
AdaptEstimate estimate_candidate(const AdaptSpec& spec, size_t index, const QuerySignals& q, const LoadSignals& load);
AdaptChoice choose_adapt(const AdaptSpec& spec, const AdaptGoal& goal, const QuerySignals& q, const LoadSignals& load);

// The signals of a query from its retrieval result: `scores` and `passages` (token ids) in the
// retriever's rank order, `question` the question's token ids.
QuerySignals query_signals(std::span<const float> scores, std::span<const std::vector<int32_t>> passages,
                           std::span<const int32_t> question);

}  // namespace ragd::pipelines
