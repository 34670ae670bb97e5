// The model ids of the OpenAI-compatible routes (openai_models.h).
#include "openai_models.h"

namespace ragd::daemon {

std::string ModelCatalog::generator_id(const std::string& model_name) {
  if (model_name.empty() || model_name.starts_with(kPipelineIdPrefix)) return std::string(kGeneratorAlias);
  return model_name;
}

ModelCatalog ModelCatalog::of(const pipelines::Executor& ex) {
  ModelCatalog c;
  ServedModel g;
  g.kind = ServedModel::Kind::kGenerator;
  g.id = generator_id(ex.model_name());
  c.models.push_back(std::move(g));
  for (const auto& p : ex.pipelines()) {
    ServedModel m;
    m.kind = ServedModel::Kind::kPipeline;
    m.id = std::string(kPipelineIdPrefix) + p.name;
    m.pipeline = p.name;
    m.description = p.description;
    m.number_passages = p.number_passages;
    c.models.push_back(std::move(m));
  }
  return c;
}

ApiError ModelCatalog::resolve(const std::string& requested, ServedModel* out) const {
  const ServedModel& gen = models.front();
  if (requested.empty() || requested == gen.id || requested == kGeneratorAlias) {
    *out = gen;
    return {};
  }
  for (const auto& m : models)
    if (m.kind == ServedModel::Kind::kPipeline && (m.id == requested || m.pipeline == requested)) {
      *out = m;
      return {};
    }
  std::string listed;
  for (const auto& m : models) listed += (listed.empty() ? "" : ", ") + m.id;
  return {404, "model_not_found",
          "model '" + clip_input(requested) + "' is not served here (GET /v1/models lists: " + clip_input(listed, 512) + ")",
          "model", {}};
}

const ServedModel* ModelCatalog::pipeline(const std::string& name) const {
  for (const auto& m : models)
    if (m.kind == ServedModel::Kind::kPipeline && m.pipeline == name) return &m;
  return nullptr;
}

}  // namespace ragd::daemon
