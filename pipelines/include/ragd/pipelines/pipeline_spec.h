// Pipeline specs: one TOML file per pipeline in the pipelines directory.
//
//   [pipeline]   name = "docs-qa"          (default: file stem), description = "..."
//   [retriever]  top_k = 4, mode = "auto" (auto|hybrid|lexical|dense), index = "Flat", nprobe = 8,
//                speculative_prefill = false,
//                rerank = 0 (keep this many of the top_k after reranking them with the model: reranker.h)
//                rerank_model = "" (a cross-encoder directory scores instead of the generator)
//   [prompt]     system = "...", context_header = "Context:\n", separator = "\n\n",
//                question_prefix = "\nQuestion: ", number_passages = false ("[n] " before each passage),
//                chat_template = "model"  (model|auto|llama3|chatml|mistral|none),
//                sources_footer = false (OpenAI routes: the answer ends with a "Sources:" list)
//   [reuse]      mode = "knowledge_tree"   (none | prefix | knowledge_tree | cacheblend | epic | auto),
//                recompute_ratio = 0.15 (cacheblend, 0..1), epic_k = 16 (epic, 0..4096)
//   [iterative]  retrieval_interval = 16, query_window = 16, overlap = "none" (none | piperag |
//                speculative | both), speculation_cache = 20, max_stride = 8, max_nprobe = 0,
//                query_lag = 0 (iterative.h); the table makes the pipeline iterative
//   [generation] max_tokens = 256, temperature = 0.0, top_p = 1.0, top_k = 0, seed = 0, stop = ["..."],
//                extractive = false (answers copied verbatim from the prompt: pipelines/src/extractive.h),
//                speculative_k = N (0..16: n-gram draft tokens per decode step; unset = the server's
//                runtime.speculative_k; a request's speculative_k wins),
//                speculative = { method = "ngram" | "draft", k = N, draft_model = "DIR" } (draft
//                source and draft model; unset = the server's runtime.speculative_*)
//   [adapt]      candidates = [{top_k = 1}, {top_k = 4, rerank = 1}, ...], objective = "balanced"
//                (quality | balanced | latency), slo_ttft_ms, quality_tolerance = 0.02,
//                profile = "<stem>.profile": per-query choice among candidate configurations
//                (adapt_policy.h); the fitted profile beside the spec is loaded when present
//
// Unknown tables or keys and wrong types are errors naming the file and the key. A built-in
// "default" pipeline (top-4 retrieval, knowledge-tree reuse) exists unless a file redefines it.
// Thread-safety: value types and pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/pipelines/adapt_policy.h"
#include "ragd/pipelines/draft_method.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/run_params.h"

namespace ragd::pipelines {

// The default cut of weak passages (min_score_ratio below) by the score a search ranks by: BM25
// scores fall off faster than the weighted fusion's, whose cosine part keeps distractors closer.
inline constexpr double kLexicalScoreRatio = 0.6;
inline constexpr double kFusedScoreRatio = 0.7;

struct PipelineSpec {
  std::string name = "default";
  std::string description = "top-4 retrieval, knowledge-tree KV reuse";
  // retriever
  int top_k = 4;                    // chunks retrieved per query
  std::string index = "Flat";       // FAISS factory string of the corpus index (informational)
  int nprobe = 8;                   // IVF lists probed per search
  // Lexical and hybrid (weighted fusion) search: a retrieved passage whose score (BM25, or the
  // fused score) is below this fraction of the first passage's is left out of the prompt (the
  // first always stays; 0 = off). Scores fall off steeply past the passages that match the
  // question; a weak match is a distractor to the model. Dense searches and hybrid with rrf fusion
  // keep all top_k (cosines and fused ranks lie too close together for a ratio to mean the same),
  // as do reranked and [adapt] runs (the reranker or the chosen candidate decides). One-shot
  // runs; 0..1. Unset (< 0, the default): the ranking's own, kLexicalScoreRatio for BM25 and
  // kFusedScoreRatio for the fused score (each chosen on measurements: docs/benchmarks.md).
  double min_score_ratio = -1;
  // One-shot runs over an IVF index: search in stages (nprobe / 4, / 2, all) and start the prefill
  // on each stage's candidates, restarting when they change (RAGCache's speculative pipelining).
  bool speculative_prefill = false;
  // > 0: the top_k passages are reranked and the best `rerank` of them make the prompt. One-shot
  // pipelines only. By the generator (log P(question | passage), reranker.h) unless rerank_model
  // names a cross-encoder checkpoint directory (BertForSequenceClassification, e.g. bge-reranker;
  // retrieval/reranker.h), loaded once per directory at start-up.
  int rerank = 0;
  std::string rerank_model;  // "" = the generator (UPR)
  // [retriever] mode: hybrid | lexical | dense | auto (the corpus's default: lexical with the
  // hashing embedder, hybrid with a semantic one). A request's retrieval_mode wins.
  retrieval::RetrievalMode retrieval_mode = retrieval::RetrievalMode::kAuto;
  // prompt: [system prefix][context_header][doc1 + separator]...[question_prefix + question][suffix]
  std::string system_prompt = "You are a helpful assistant. Answer the question using the context.";
  std::string context_header = "Context:\n";
  std::string separator = "\n\n";
  std::string question_prefix = "\nQuestion: ";
  // true: each passage starts "[n] " (n = its rank in the prompt, from 1; sources are listed in
  // the same order), so answers can cite [n]. Knowledge-tree and prefix reuse are unchanged (a
  // path fixes every passage's rank); CacheBlend / EPIC reuse a passage only at the same rank.
  bool number_passages = false;
  // true: on the OpenAI routes the answer's text ends with a list of its sources ("\n\nSources:\n
  // [1] Title — url, section, page N"), for clients that keep only the message's text (LangChain's
  // ChatOpenAI drops annotations and ragd's fields). The REST and WebSocket APIs send sources as
  // data and are unchanged.
  bool sources_footer = false;
  // "model": the model's own chat template (tokenizer_config.json / chat_template.jinja), or "auto"
  // when it ships none; "auto": a built-in picked by the tokenizer's special tokens; or a built-in
  // name (llama3 | chatml | mistral | none).
  std::string chat_template = "model";
  ReuseMode reuse = kDefaultPipelineReuse;
  BlendParams blend;                // parameters of the approximate modes
  // Set: an iterative pipeline (retrieval during generation, iterative.h); unset: one-shot.
  std::optional<IterativeParams> iterative;
  // generation defaults (a request may override them)
  int max_tokens = kDefaultMaxTokens;
  float temperature = 0.0f;
  float top_p = 1.0f;
  int sampling_top_k = 0;
  uint64_t seed = 0;
  std::vector<std::string> stop;
  bool extractive = false;
  // Speculative decoding's draft tokens per decode step for this pipeline's runs (0 = off); unset =
  // RuntimeOptions::speculative.k. A request's speculative_k wins.
  std::optional<int> speculative_k;
  // [generation] speculative = { method = "ngram" | "draft", k = N, draft_model = "DIR" }: the
  // draft source and its model for this pipeline's runs (unset: the server's runtime.speculative_*;
  // k sets speculative_k). The runtime loads every pipeline's draft_model at start.
  std::optional<DraftMethod> speculative_method;
  std::string draft_model;
  // Set: per-query choice among candidate configurations ([adapt], adapt_policy.h); the run's
  // top_k, rerank, extractive and retrieval_interval then come from the chosen candidate.
  std::optional<AdaptSpec> adapt;
  // Set ([semantic_cache]): a question close enough (cosine of the corpus embedder's vectors >=
  // threshold) to an earlier one of the same tenant and cache_salt, over the same retrieved
  // passages, gets the earlier answer (semantic_cache.h). One-shot pipelines only.
  struct SemanticCacheSpec {
    double threshold = 0.4;  // 0..1; chosen with grounding on (docs/benchmarks.md)
    // The questions' grounded terms (their words found in the passages) must be the same set
    // (semantic_cache.h); default on.
    bool grounding = true;
    // Grounded terms held by more than this share of the chunks the tenant searches are too common
    // to tell two questions apart and are not compared (0..1; 1 = compare every grounded term).
    double grounding_max_share = 0.2;
  };
  std::optional<SemanticCacheSpec> semantic_cache;

  PipelineInfo info() const;
};

PipelineSpec default_pipeline_spec();
// source_name is used in error messages ("pipelines/qa.toml: [retriever] top_k: ...").
Result<PipelineSpec> parse_pipeline_spec(std::string_view toml_text, std::string_view source_name,
                                         std::string_view default_name = "default");
Result<PipelineSpec> load_pipeline_spec(const std::string& path);
// Every *.toml in dir (sorted by name) plus the built-in default unless redefined. "" = only the
// default. Duplicate names are an error naming both files.
Result<std::vector<PipelineSpec>> load_pipeline_dir(const std::string& dir);

}  // namespace ragd::pipelines
