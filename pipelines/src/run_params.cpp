// resolve_run: (request, pipeline spec) -> ResolvedRun. Every per-run default is applied here.
#include "ragd/pipelines/run_params.h"

#include "ragd/pipelines/pipeline_spec.h"

namespace ragd::pipelines {

Result<ResolvedRun> resolve_run(const RunRequest& req, const PipelineSpec* spec) {
  ResolvedRun out;
  out.spec = spec;
  // Retrieval.
  if (req.retrieval_top_k > kRangeRetrievalTopK.hi)
    return kRangeRetrievalTopK.check("top_k", req.retrieval_top_k);
  if (spec) {
    if (req.query.empty()) return Status::InvalidArgument("query must not be empty");
    out.retrieval_k = req.retrieval_top_k >= 0 ? req.retrieval_top_k : spec->top_k;
  } else if (req.messages.empty() && req.prompt.empty()) {
    return Status::InvalidArgument("one of messages or prompt is required");
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
  out.speculative_prefill = spec && !spec->iterative && spec->rerank == 0 && req.context_must_include.empty() &&
                            req.speculative_prefill.value_or(spec->speculative_prefill) && out.retrieval_k > 0;
  // Generation: a pipeline run starts from its spec's defaults, a plain run from the request's
  // sampling; explicit overrides win either way.
  engine::SamplingParams& p = out.sampling;
  p = req.sampling;
  if (spec) {
    p.max_tokens = spec->max_tokens;
    p.temperature = spec->temperature;
    p.top_p = spec->top_p;
    p.top_k = spec->sampling_top_k;
    p.seed = spec->seed;
    p.stop = spec->stop;
  }
  const RunOverrides& o = req.overrides;
  if (o.max_tokens) p.max_tokens = *o.max_tokens;
  if (o.temperature) p.temperature = *o.temperature;
  if (o.top_p) p.top_p = *o.top_p;
  if (o.sampling_top_k) p.top_k = *o.sampling_top_k;
  if (o.seed) p.seed = *o.seed;
  if (o.stop) p.stop = *o.stop;
  RAGD_RETURN_IF_ERROR(p.validate());
  if (p.max_tokens <= 0) return Status::InvalidArgument("max_tokens must be positive");
  out.extractive = o.extractive.value_or(spec != nullptr && spec->extractive);
  return out;
}

}  // namespace ragd::pipelines
