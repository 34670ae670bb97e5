// POST /v1/rerank in the Cohere / Jina shape that vLLM and Text Embeddings Inference accept:
//   {"model"?, "query": "...", "documents": ["..." | {"text": "..."}], "top_n"?, "return_documents"?}
//   -> {"id", "object": "rerank", "model", "results": [{"index", "relevance_score", "document"?: {"text"}}],
//       "usage": {"total_tokens"}}
// Results are ordered by relevance_score (highest first), top_n of them (default all). The scores
// are the cross-encoder's raw logits (runtime.rerank_model_dir). "model" is the cross-encoder's id
// (rerank:<directory name>, GET /v1/models), the generator's or absent. Pairs longer than the model's limit
// are truncated (the document loses tokens first), never refused.
#include <algorithm>
#include <numeric>

#include "openai_encode.h"
#include "openai_models.h"

namespace ragd::daemon {

void ApiImpl::rerank(const ReqCtx& ctx, const HttpRequest& req, Responder respond) {
  JsonBody body;
  if (auto e = body.parse(req.body); e.failed()) return respond(to_response(e));
  Fields f(body.object());
  std::string query;
  if (auto e = f.str("query", &query, true); e.failed()) return respond(to_response(e));
  if (query.empty()) return respond(to_response(bad_request("query", "field 'query' must not be empty")));
  auto in = f.get("documents");
  if (!in) return respond(to_response(bad_request("documents", "field 'documents' is required")));
  simdjson::dom::array arr;
  if (in->get_array().get(arr))
    return respond(to_response(bad_request("documents", "field 'documents' must be an array of strings or {\"text\": ...}")));
  std::vector<std::string> docs;
  size_t i = 0;
  for (auto el : arr) {
    std::string_view sv;
    if (el.get_string().get(sv) && el["text"].get_string().get(sv))
      return respond(to_response(bad_request("documents[" + std::to_string(i) + "]",
                                             "field 'documents[" + std::to_string(i) + "]' must be a string or {\"text\": string}")));
    docs.emplace_back(sv);
    ++i;
  }
  if (docs.empty()) return respond(to_response(bad_request("documents", "field 'documents' must not be empty")));
  if (docs.size() > 1024) return respond(to_response(bad_request("documents", "field 'documents' has more than 1024 entries")));
  int64_t top_n = static_cast<int64_t>(docs.size());
  bool has_top = false;
  if (auto e = f.integer("top_n", &top_n, 1, 1 << 20, &has_top); e.failed()) return respond(to_response(e));
  bool return_documents = false;
  if (auto e = f.boolean("return_documents", &return_documents); e.failed()) return respond(to_response(e));
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  {  // the cross-encoder's id, or the generator's (or none) as before; responses name the reranker
    ServedModel served;
    const ModelCatalog catalog = ModelCatalog::of(*executor(), documents());
    if (auto e = catalog.resolve_for(model, ServedModel::Kind::kReranker, "/v1/rerank", &served); e.failed())
      return respond(to_response(e));
    if (served.kind == ServedModel::Kind::kReranker) model = served.id;
  }
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(ctx.tenant, &slot); e.failed()) return respond(to_response(e));
  auto self = shared_from_this();
  const std::string rid = ctx.id;
  bool queued = blocking_.submit([self, query = std::move(query), docs = std::move(docs), top_n, return_documents,
                                  model, rid, respond, slot]() {
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = api->rerank(query, docs);
    if (!res.ok()) return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s)));
    const std::vector<float>& scores = *res;
    std::vector<size_t> order(scores.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
    order.resize(std::min(order.size(), static_cast<size_t>(top_n)));
    int64_t words = 0;
    auto count = [&](const std::string& t) {
      bool in_word = false;
      for (char c : t) {
        const bool sp = std::isspace(static_cast<unsigned char>(c));
        if (!sp && !in_word) ++words;
        in_word = !sp;
      }
    };
    for (const auto& d : docs) count(d), count(query);
    JsonWriter w;
    w.begin_object().key("id").value("rerank-" + rid).key("object").value("rerank");
    w.key("model").value(model.empty() ? std::string("ragd-reranker") : model);
    w.key("results").begin_array();
    for (size_t k : order) {
      w.begin_object().key("index").value(static_cast<uint64_t>(k)).key("relevance_score").value(scores[k]);
      if (return_documents) w.key("document").begin_object().key("text").value(docs[k]).end_object();
      w.end_object();
    }
    w.end_array();
    // No tokenizer at the edge: usage counts whitespace-separated words of every (query, document) pair.
    w.key("usage").begin_object().key("total_tokens").value(words).end_object();
    w.end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "rerank queue is full", "", {{"Retry-After", "1"}}}));
}

}  // namespace ragd::daemon
