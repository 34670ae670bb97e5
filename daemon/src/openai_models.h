// Private to the daemon: the model ids the OpenAI-compatible routes serve (GET /v1/models and the
// `model` field of every request).
//
// Id scheme (docs/api.md, "Model ids"):
//   <generator>          the generator, by its model directory's name; "ragd" is an alias of it
//   pipeline:<name>      a configured pipeline: RAG over the generator. Pipeline names are
//                        [A-Za-z0-9._-], so no two pipelines share an id, and no model directory
//                        name is taken for a pipeline: a generator whose directory name starts
//                        with "pipeline:" is listed as "ragd" instead.
//   <name>               accepted (never listed) as an alias of pipeline:<name> when it is neither
//                        the generator's id nor "ragd": a pipeline named like the model is reached
//                        only through its prefixed id (the model keeps its name).
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "errors.h"
#include "ragd/pipelines/executor.h"

namespace ragd::daemon {

inline constexpr std::string_view kPipelineIdPrefix = "pipeline:";
inline constexpr std::string_view kGeneratorAlias = "ragd";

// One entry of GET /v1/models.
struct ServedModel {
  enum class Kind : uint8_t { kGenerator, kPipeline };
  Kind kind = Kind::kGenerator;
  std::string id;                  // what GET /v1/models lists and responses echo
  std::string pipeline;            // kPipeline: the pipeline's name
  std::string description;         // kPipeline: the spec's description
  bool number_passages = false;    // kPipeline: passages are numbered "[n] " in the prompt
};

// What the daemon serves, as the routes see it.
struct ModelCatalog {
  std::vector<ServedModel> models;  // the generator first, then the pipelines in spec order

  static ModelCatalog of(const pipelines::Executor& ex);
  // The generator's listed id for a model directory name (see the scheme above).
  static std::string generator_id(const std::string& model_name);

  // The entry a request's `model` names ("" = the generator); a 404 naming it otherwise.
  ApiError resolve(const std::string& requested, ServedModel* out) const;
  // The pipeline entry named `name` (the `pipeline` request field), or nullptr.
  const ServedModel* pipeline(const std::string& name) const;
};

}  // namespace ragd::daemon
