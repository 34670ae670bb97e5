// The model ids of the OpenAI-compatible routes (openai_models.h).
#include "openai_models.h"

namespace ragd::daemon {

std::string ModelCatalog::generator_id(const std::string& model_name) {
  if (model_name.empty() || model_name.starts_with(kPipelineIdPrefix) || model_name.starts_with(kEmbedderIdPrefix) ||
      model_name.starts_with(kRerankerIdPrefix))
    return std::string(kGeneratorAlias);
  return model_name;
}

ModelCatalog ModelCatalog::of(const pipelines::Executor& ex, const pipelines::DocumentApi* docs) {
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
    m.sources_footer = p.sources_footer;
    c.models.push_back(std::move(m));
  }
  if (docs) {
    const std::pair<ServedModel::Kind, pipelines::EncoderInfo> encoders[] = {
        {ServedModel::Kind::kEmbedder, docs->embedder_info()}, {ServedModel::Kind::kReranker, docs->reranker_info()}};
    for (const auto& [kind, info] : encoders) {
      if (info.name.empty()) continue;
      ServedModel m;
      m.kind = kind;
      m.id = std::string(kind == ServedModel::Kind::kEmbedder ? kEmbedderIdPrefix : kRerankerIdPrefix) + info.name;
      m.encoder = info;
      c.models.push_back(std::move(m));
    }
  }
  return c;
}

ApiError ModelCatalog::resolve_for(const std::string& requested, ServedModel::Kind kind, const std::string& route,
                                   ServedModel* out) const {
  const bool encoder_route = kind == ServedModel::Kind::kEmbedder || kind == ServedModel::Kind::kReranker;
  auto routes_models = [&] {
    std::string ids;
    for (const auto& m : models)
      if (encoder_route ? m.kind == kind : (m.kind == ServedModel::Kind::kGenerator || m.kind == ServedModel::Kind::kPipeline))
        ids += (ids.empty() ? "" : ", ") + m.id;
    return ids;
  };
  ServedModel found;
  if (auto e = resolve(requested, &found); e.failed()) return e;
  if (encoder_route && found.kind == ServedModel::Kind::kGenerator) {
    // The generator's id (or none) on an encoder's route: that route's encoder, as it always was.
    for (const auto& m : models)
      if (m.kind == kind) {
        *out = m;
        return {};
      }
    *out = std::move(found);  // none of that kind: the route says why (no corpus, no reranker)
    return {};
  }
  const bool fits = encoder_route ? found.kind == kind
                                  : (found.kind == ServedModel::Kind::kGenerator || found.kind == ServedModel::Kind::kPipeline);
  if (!fits)
    return bad_request("model", "model '" + clip_input(requested) + "' is not served by " + route + " (it serves: " +
                                    clip_input(routes_models(), 512) + ")");
  *out = std::move(found);
  return {};
}

ApiError ModelCatalog::resolve(const std::string& requested, ServedModel* out) const {
  const ServedModel& gen = models.front();
  if (requested.empty() || requested == gen.id || requested == kGeneratorAlias) {
    *out = gen;
    return {};
  }
  for (const auto& m : models)
    if (m.id == requested || (m.kind == ServedModel::Kind::kPipeline && m.pipeline == requested)) {
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
