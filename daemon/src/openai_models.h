// Private to the daemon: the model ids the OpenAI-compatible routes serve (GET /v1/models and the
// `model` field of every request).
//
// Id scheme (docs/api.md, "Model ids"):
//   <generator>          the generator, by its model directory's name; "ragd" is an alias of it
//   pipeline:<name>      a configured pipeline: RAG over the generator. Pipeline names are
//                        [A-Za-z0-9._-], so no two pipelines share an id, and no model directory
//                        name is taken for a pipeline: a generator whose directory name starts
//                        with "pipeline:" (or "embedding:", "rerank:") is listed as "ragd" instead.
//   <name>               accepted (never listed) as an alias of pipeline:<name> when it is neither
//                        the generator's id nor "ragd": a pipeline named like the model is reached
//                        only through its prefixed id (the model keeps its name).
//   embedding:<name>     the corpus's embedder (/v1/embeddings): "hashing", "termvec", or its
//                        checkpoint directory's name
//   rerank:<name>        the cross-encoder (/v1/rerank), by its checkpoint directory's name
// /v1/embeddings and /v1/rerank also answer to the generator's id and "ragd" (as they always did).
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "errors.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/runtime.h"

namespace ragd::daemon {

inline constexpr std::string_view kPipelineIdPrefix = "pipeline:";
inline constexpr std::string_view kGeneratorAlias = "ragd";
inline constexpr std::string_view kEmbedderIdPrefix = "embedding:";
inline constexpr std::string_view kRerankerIdPrefix = "rerank:";

// One entry of GET /v1/models.
struct ServedModel {
  enum class Kind : uint8_t { kGenerator, kPipeline, kEmbedder, kReranker };
  Kind kind = Kind::kGenerator;
  std::string id;                  // what GET /v1/models lists and responses echo
  std::string pipeline;            // kPipeline: the pipeline's name
  std::string description;         // kPipeline: the spec's description
  bool number_passages = false;    // kPipeline: passages are numbered "[n] " in the prompt
  bool sources_footer = false;     // kPipeline: answers end with their sources (openai_citations.h)
  pipelines::EncoderInfo encoder;  // kEmbedder, kReranker
};

// What the daemon serves, as the routes see it.
struct ModelCatalog {
  std::vector<ServedModel> models;  // the generator first, the pipelines in spec order, the encoders

  // `docs` may be null (no corpus: no encoders).
  static ModelCatalog of(const pipelines::Executor& ex, const pipelines::DocumentApi* docs);
  // The generator's listed id for a model directory name (see the scheme above).
  static std::string generator_id(const std::string& model_name);

  // The entry a request's `model` names ("" = the generator); a 404 naming it otherwise.
  ApiError resolve(const std::string& requested, ServedModel* out) const;
  // What `route` serves for `requested`: kGenerator or kPipeline for the completion routes; the
  // encoder of `kind` (kEmbedder, kReranker) for theirs, which also answer to the generator's id and
  // "" (the generator's entry when there is no such encoder: the route says why). A model of
  // another kind is a 400 naming the route's models.
  ApiError resolve_for(const std::string& requested, ServedModel::Kind kind, const std::string& route, ServedModel* out) const;
  // The pipeline entry named `name` (the `pipeline` request field), or nullptr.
  const ServedModel* pipeline(const std::string& name) const;
};

}  // namespace ragd::daemon
