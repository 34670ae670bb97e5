// resolve_run: (request, pipeline spec) -> ResolvedRun. Every per-run default is applied here.
#include "ragd/pipelines/run_params.h"

#include <algorithm>

#include "ragd/pipelines/pipeline_spec.h"

namespace ragd::pipelines {

namespace {

// Keeps the candidates whose `value` equals `want`; InvalidArgument naming the field when none does.
template <class Get>
Status narrow_adapt(const AdaptSpec& a, const std::string& pipeline, std::string_view field, int want, Get value,
                    std::vector<size_t>* allowed) {
  std::vector<size_t> kept;
  std::string have;
  for (size_t i : *allowed) {
    if (value(a.candidates[i]) == want) kept.push_back(i);
    have += (have.empty() ? "" : " | ") + std::to_string(value(a.candidates[i]));
  }
  if (kept.empty())
    return Status::InvalidArgument(std::string(field) + ": " + std::to_string(want) + " is not among the [adapt] candidates of pipeline '" +
                                   pipeline + "' (" + have + ")");
  *allowed = std::move(kept);
  return Status::OK();
}

// An adaptive run's goal: the pipeline's candidates, narrowed by the request's knobs.
Result<AdaptGoal> resolve_adapt(const RunRequest& req, const PipelineSpec& spec) {
  const AdaptSpec& a = *spec.adapt;
  AdaptGoal g;
  g.objective = req.adapt_objective.value_or(a.objective);
  g.slo_ttft_ms = req.slo_ttft_ms.value_or(a.slo_ttft_ms);
  g.quality_tolerance = a.quality_tolerance;
  if (g.objective == AdaptObjective::kLatency && g.slo_ttft_ms <= 0)
    return Status::InvalidArgument("slo_ttft_ms: objective 'latency' needs a TTFT target (pipeline '" + spec.name +
                                   "' has none)");
  for (size_t i = 0; i < a.candidates.size(); ++i) g.allowed.push_back(i);
  if (req.adapt && *req.adapt != "auto") {
    const AdaptCandidate* c = a.find(*req.adapt);
    if (!c) {
      std::string names;
      for (const auto& x : a.candidates) names += (names.empty() ? "" : " | ") + x.name;
      return Status::InvalidArgument("adapt: '" + *req.adapt + "' is not a candidate of pipeline '" + spec.name +
                                     "' (auto | " + names + ")");
    }
    g.allowed = {static_cast<size_t>(c - a.candidates.data())};
    g.forced = true;
  }
  if (req.retrieval_top_k >= 0)
    RAGD_RETURN_IF_ERROR(narrow_adapt(a, spec.name, "top_k", req.retrieval_top_k,
                                      [](const AdaptCandidate& c) { return c.top_k; }, &g.allowed));
  if (req.sampling.extractive)
    RAGD_RETURN_IF_ERROR(narrow_adapt(a, spec.name, "extractive", *req.sampling.extractive ? 1 : 0,
                                      [](const AdaptCandidate& c) { return c.extractive ? 1 : 0; }, &g.allowed));
  if (req.retrieval_interval && spec.iterative) {
    const int base = spec.iterative->retrieval_interval;
    RAGD_RETURN_IF_ERROR(narrow_adapt(a, spec.name, "retrieval_interval", *req.retrieval_interval,
                                      [base](const AdaptCandidate& c) { return c.retrieval_interval > 0 ? c.retrieval_interval : base; },
                                      &g.allowed));
  }
  return g;
}

}  // namespace

void apply_adapt_choice(ResolvedRun& run, const AdaptCandidate& chosen) {
  run.retrieval_k = chosen.top_k;
  run.rerank = chosen.rerank;
  run.extractive = chosen.extractive;
  if (run.iterative && chosen.retrieval_interval > 0) run.iterative->retrieval_interval = chosen.retrieval_interval;
}

Result<ResolvedRun> resolve_run(const RunRequest& req, const PipelineSpec* spec) {
  ResolvedRun out;
  out.spec = spec;
  // Retrieval.
  if (req.top_logprobs < 0 || req.top_logprobs > 20)
    return Status::InvalidArgument("top_logprobs must be in 0..20, got " + std::to_string(req.top_logprobs));
  if (req.retrieval_top_k > kRangeRetrievalTopK.hi)
    return kRangeRetrievalTopK.check("top_k", req.retrieval_top_k);
  if (spec) {
    if (req.query.empty()) return Status::InvalidArgument("query must not be empty");
    if (!req.prompt_ids.empty()) return Status::InvalidArgument("a pipeline run's query is text: prompt token ids apply to plain runs only");
    out.retrieval_k = req.retrieval_top_k >= 0 ? req.retrieval_top_k : spec->top_k;
    out.retrieval_mode = req.retrieval_mode.value_or(spec->retrieval_mode);
    out.min_score_ratio = req.min_score_ratio.value_or(spec->min_score_ratio);
    if (!req.filter_json.empty()) {
#if RAGD_HAVE_RETRIEVAL
      RAGD_ASSIGN_OR_RETURN(auto f, retrieval::parse_metadata_filter(req.filter_json));
      if (!f.empty()) out.filter = std::make_shared<const retrieval::MetadataFilter>(std::move(f));
#else
      return Status::InvalidArgument("filter: this build has no retrieval module");
#endif
    }
    out.rerank = spec->rerank;
    if (spec->adapt) {
      RAGD_ASSIGN_OR_RETURN(out.adapt, resolve_adapt(req, *spec));
      // The search fetches what the largest candidate needs, whichever are allowed: the signals
      // are then those of one search, the same whether the policy chooses or the request forces.
      out.retrieval_k = 0;
      for (const auto& c : spec->adapt->candidates) out.retrieval_k = std::max(out.retrieval_k, c.top_k);
    } else if (req.adapt || req.adapt_objective || req.slo_ttft_ms) {
      return Status::InvalidArgument("adapt, adapt_objective and slo_ttft_ms apply to adaptive pipelines only; '" +
                                     spec->name + "' has no [adapt] table");
    }
  } else if (req.adapt || req.adapt_objective || req.slo_ttft_ms) {
    return Status::InvalidArgument("adapt, adapt_objective and slo_ttft_ms apply to adaptive pipelines only");
  } else if (req.retrieval_mode || !req.filter_json.empty() || req.min_score_ratio) {
    return Status::InvalidArgument(std::string(req.retrieval_mode ? "retrieval_mode" : req.min_score_ratio ? "min_score_ratio" : "filter") +
                                   " applies to pipeline runs only (a plain run searches nothing)");
  } else if (req.messages.empty() && req.prompt.empty() && req.prompt_ids.empty()) {
    return Status::InvalidArgument("one of messages or prompt is required");
  } else if (!req.prompt_ids.empty() && (!req.messages.empty() || !req.prompt.empty())) {
    return Status::InvalidArgument("prompt token ids go alone: not with messages or a text prompt");
  }
  // Iterative retrieval.
  if (spec && spec->iterative) {
    IterativeParams it = *spec->iterative;
    if (req.overlap) it.overlap = *req.overlap;
    if (req.retrieval_interval) it.retrieval_interval = *req.retrieval_interval;
    RAGD_RETURN_IF_ERROR(it.validate());
    if (out.retrieval_k <= 0) return Status::InvalidArgument("an iterative pipeline needs top_k > 0");
    out.iterative = it;
  } else if (req.overlap || req.retrieval_interval) {
    return Status::InvalidArgument(spec ? "overlap and retrieval_interval apply to iterative pipelines only; '" +
                                              spec->name + "' is one-shot"
                                        : std::string("overlap and retrieval_interval apply to iterative pipelines only"));
  }
  // KV reuse.
  if (spec) {
    out.reuse = req.reuse.value_or(spec->reuse);
    out.blend = spec->blend;
  } else {
    out.reuse = req.reuse.value_or(kDefaultPlainRunReuse);
    if (out.reuse == ReuseMode::kKnowledgeTree) out.reuse = ReuseMode::kPrefix;  // no documents to key
  }
  if (req.recompute_ratio) out.blend.recompute_ratio = *req.recompute_ratio;
  if (req.epic_k) out.blend.epic_k = *req.epic_k;
  RAGD_RETURN_IF_ERROR(out.blend.validate());
  if (is_approximate(out.reuse) && !spec)
    return Status::InvalidArgument("reuse mode '" + std::string(reuse_mode_name(out.reuse)) +
                                   "' needs retrieved documents (a pipeline run)");
  // Speculative prefill: one-shot runs whose prompt is the search's top-k: not iterative or
  // reranking pipelines, nor a run with a forced document (those are plain runs).
  out.speculative_prefill = spec && !spec->iterative && spec->rerank == 0 && !spec->adapt && req.context_must_include.empty() &&
                            req.speculative_prefill.value_or(spec->speculative_prefill) && out.retrieval_k > 0;
  out.speculative_method = req.speculative_method ? req.speculative_method : spec ? spec->speculative_method : std::nullopt;
  out.draft_model = req.draft_model ? *req.draft_model : spec ? spec->draft_model : std::string();
  if (req.draft_model) {
    if (req.speculative_method && *req.speculative_method != DraftMethod::kDraft)
      return Status::InvalidArgument("draft_model is for speculative_method \"draft\", not \"" +
                                     std::string(draft_method_name(*req.speculative_method)) + "\"");
    out.speculative_method = DraftMethod::kDraft;
  }
  if (out.speculative_method == DraftMethod::kNgram) out.draft_model.clear();
  // Generation: built-in defaults, a pipeline run's spec values over them, the request's set values
  // over both.
  engine::SamplingParams& p = out.sampling;
  if (spec) {
    p.max_tokens = spec->max_tokens;
    p.temperature = spec->temperature;
    p.top_p = spec->top_p;
    p.top_k = spec->sampling_top_k;
    p.seed = spec->seed;
    p.stop = spec->stop;
  } else {
    p.max_tokens = kDefaultMaxTokens;
  }
  const RunSampling& o = req.sampling;
  if (o.max_tokens) p.max_tokens = *o.max_tokens;
  if (o.temperature) p.temperature = *o.temperature;
  if (o.top_p) p.top_p = *o.top_p;
  if (o.top_k) p.top_k = *o.top_k;
  if (o.seed) p.seed = *o.seed;
  if (o.stop) p.stop = *o.stop;
  if (o.min_p) p.min_p = *o.min_p;
  if (o.repetition_penalty) p.repetition_penalty = *o.repetition_penalty;
  if (o.presence_penalty) p.presence_penalty = *o.presence_penalty;
  if (o.frequency_penalty) p.frequency_penalty = *o.frequency_penalty;
  p.stop_token_ids = o.stop_token_ids;
  p.ignore_eos = o.ignore_eos;
  p.constraint = o.constraint;
  RAGD_RETURN_IF_ERROR(p.validate());
  if (p.max_tokens <= 0) return Status::InvalidArgument("max_tokens must be positive");
  out.extractive = o.extractive.value_or(spec != nullptr && spec->extractive);
  return out;
}

}  // namespace ragd::pipelines
