// /v1/documents: upload (one, many, or an array), list, get and delete, scoped by tenant.
//
// A tenant writes and deletes its own documents and reads its own plus the shared ones (those
// ingested by `ragctl ingest` or an operator); shared documents are read-only to tenants. A
// document that is absent and one that belongs to another tenant look the same: 404.
#include <cstdlib>

#include "api_impl.h"
#include "ragd/common/log.h"

namespace ragd::daemon {

namespace {
void write_summary(JsonWriter& w, const pipelines::IngestSummary& s) {
  w.begin_object();
  w.key("ingested").value(s.ingested).key("unchanged").value(s.unchanged).key("replaced").value(s.replaced);
  w.key("skipped").value(s.skipped).key("chunks").value(s.chunks).key("skip_reasons").begin_array();
  for (const auto& r : s.skip_reasons) w.value(r);
  w.end_array().end_object();
}

ApiError parse_document(simdjson::dom::element el, const std::string& where, pipelines::DocumentInput* d) {
  simdjson::dom::object o;
  if (el.get_object().get(o)) return bad_request(where, "'" + where + "' must be an object with 'id' and 'text'");
  Fields f(o, where + ".");
  if (auto e = f.only({"id", "title", "text", "source", "url", "format", "page", "sections", "metadata"}); e.failed())
    return e;
  if (auto e = f.str("id", &d->id, true); e.failed()) return e;
  if (d->id.empty()) return bad_request(where + ".id", "field '" + where + ".id' must not be empty");
  if (d->id.size() > 512) return bad_request(where + ".id", "field '" + where + ".id' is longer than 512 bytes");
  for (char c : d->id)
    if (static_cast<unsigned char>(c) < 0x20)
      return bad_request(where + ".id", "field '" + where + ".id' must not contain control characters");
  if (auto e = f.str("text", &d->text, true); e.failed()) return e;
  if (auto e = f.str("title", &d->title); e.failed()) return e;
  if (auto e = f.str("source", &d->source); e.failed()) return e;
  if (auto e = f.str("url", &d->url); e.failed()) return e;
  // Its values are the runtime's to check (DocumentInput::format): a 400 naming them, nothing written.
  if (auto e = f.str("format", &d->format); e.failed()) return e;
  int64_t page = 0;
  bool present = false;
  if (auto e = f.integer("page", &page, 1, 1 << 30, &present); e.failed()) return e;
  if (present) d->page = static_cast<uint32_t>(page);
  if (auto secs = f.get("sections")) {
    // [{"path": ["Heading", "Sub"], "byte_begin": N, "byte_end": N}, ...]: headings already found.
    simdjson::dom::array arr;
    const std::string sw = where + ".sections";
    if (secs->get_array().get(arr)) return bad_request(sw, "field '" + sw + "' must be an array");
    size_t i = 0;
    for (auto el : arr) {
      const std::string ew = sw + "[" + std::to_string(i++) + "]";
      simdjson::dom::object o;
      if (el.get_object().get(o)) return bad_request(ew, "'" + ew + "' must be an object");
      Fields sf(o, ew + ".");
      if (auto e = sf.only({"path", "byte_begin", "byte_end"}); e.failed()) return e;
      retrieval::Section s;
      if (auto e = sf.string_list("path", &s.path); e.failed()) return e;
      int64_t b = 0, en = 0;
      if (auto e = sf.integer("byte_begin", &b, 0, INT64_MAX, &present); e.failed()) return e;
      if (auto e = sf.integer("byte_end", &en, 0, INT64_MAX, &present); e.failed()) return e;
      s.byte_begin = static_cast<uint64_t>(b);
      s.byte_end = static_cast<uint64_t>(en);
      d->sections.push_back(std::move(s));
    }
  }
  if (auto m = f.get("metadata")) {
    // Its values are checked by the corpus's one metadata reader (retrieval/reader.h), which
    // names the key; the request then fails whole with a 400.
    if (m->type() != simdjson::dom::element_type::OBJECT)
      return bad_request(where + ".metadata", "field '" + where + ".metadata' must be an object");
    d->metadata_json = simdjson::minify(*m);
  }
  return {};
}
}  // namespace

void ApiImpl::documents_post(const ReqCtx& ctx, const HttpRequest& req, Responder respond) {
  // Accepts {"id",...} (one), {"documents":[...]} (many) or a top-level array.
  std::unique_ptr<simdjson::dom::parser> own;
  simdjson::dom::parser& parser = body_parser(req.body.size(), &own);
  simdjson::dom::element doc;
  if (req.body.empty()) return respond(to_response(bad_request("", "request body is empty; expected a document or {\"documents\": [...]}")));
  if (auto err = parser.parse(req.body.data(), req.body.size(), true).get(doc); err)
    return respond(to_response({400, "invalid_json", std::string("malformed JSON: ") + simdjson::error_message(err), "", {}}));
  std::vector<pipelines::DocumentInput> docs;
  simdjson::dom::array arr;
  std::string where = "documents";
  bool is_array = !doc.get_array().get(arr);
  if (!is_array) {
    simdjson::dom::object o;
    if (doc.get_object().get(o)) return respond(to_response(bad_request("", "request body must be a JSON object or array")));
    simdjson::dom::element inner;
    if (!o["documents"].get(inner)) {
      if (inner.get_array().get(arr)) return respond(to_response(bad_request("documents", "field 'documents' must be an array")));
      is_array = true;
      Fields top(o);
      if (auto e = top.only({"documents"}); e.failed()) return respond(to_response(e));
    } else {
      pipelines::DocumentInput d;
      if (auto e = parse_document(doc, "document", &d); e.failed()) return respond(to_response(e));
      docs.push_back(std::move(d));
    }
  }
  if (is_array) {
    size_t i = 0;
    for (auto el : arr) {
      pipelines::DocumentInput d;
      if (auto e = parse_document(el, where + "[" + std::to_string(i) + "]", &d); e.failed()) return respond(to_response(e));
      docs.push_back(std::move(d));
      ++i;
    }
    if (docs.empty()) return respond(to_response(bad_request("documents", "field 'documents' is empty")));
  }
  // Ownership is written by the document store in the batch that writes the documents.
  for (auto& d : docs) d.tenant = ctx.document_scope();
  auto self = shared_from_this();
  std::string rid = ctx.id;
  bool queued = blocking_.submit([self, rid, docs = std::move(docs), respond]() mutable {
    size_t n = docs.size();
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = api->ingest(std::move(docs));
    if (!res.ok()) return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s, rid)));
    log::daemon()->info("{} ingested {} document(s): {} new, {} replaced, {} unchanged, {} skipped", rid, n,
                        res->ingested, res->replaced, res->unchanged, res->skipped);
    JsonWriter w;
    write_summary(w, *res);
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued)
    respond(to_response({429, "overloaded", "document queue is full", "", {{"Retry-After", std::to_string(cfg_.limits.retry_after_s)}}}));
}

void ApiImpl::documents_get(const ReqCtx& ctx, const std::string& id, Responder respond) {
  auto self = shared_from_this();
  bool queued = blocking_.submit([self, id, scope = ctx.document_scope(), rid = ctx.id, respond] {
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = api->get(id, scope);
    if (!res.ok()) {
      if (res.status().code() == StatusCode::kNotFound) return respond(to_response(document_not_found(id)));
      return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s, rid)));
    }
    JsonWriter w;
    w.begin_object().key("id").value(res->id).key("title").value(res->title).key("source").value(res->source);
    w.key("url");
    if (res->url.empty()) w.null();
    else w.value(res->url);
    w.key("format").value(res->format);
    if (res->page > 0) w.key("page").value(static_cast<uint64_t>(res->page));
    w.key("metadata").begin_object();
    for (const auto& [k, v] : res->metadata) w.key(k).raw(v);
    w.end_object();
    w.key("shared").value(res->tenant.empty());
    w.key("content_hash").value(res->content_hash).key("chunk_ids").begin_array();
    for (uint64_t c : res->chunk_ids) w.value(c);
    w.end_array().key("text").value(res->text).end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "document queue is full", "", {{"Retry-After", "1"}}}));
}

void ApiImpl::documents_list(const ReqCtx& ctx, const HttpRequest& req, Responder respond) {
  // Query: limit (1..1000, default 100), after (an id: the page starts after it).
  size_t limit = 100;
  std::string after;
  std::string_view q = req.query;
  while (!q.empty()) {
    size_t amp = q.find('&');
    std::string_view pair = q.substr(0, amp);
    q = amp == std::string_view::npos ? std::string_view() : q.substr(amp + 1);
    size_t eq = pair.find('=');
    std::string_view key = pair.substr(0, eq);
    bool ok = false;
    std::string value = percent_decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), &ok);
    if (key == "limit") {
      char* end = nullptr;
      long v = ok && !value.empty() ? std::strtol(value.c_str(), &end, 10) : 0;
      if (!ok || value.empty() || *end != '\0' || v < 1 || v > 1000)
        return respond(to_response(bad_request("limit", "query parameter 'limit' must be an integer in 1..1000")));
      limit = static_cast<size_t>(v);
    } else if (key == "after") {
      if (!ok) return respond(to_response(bad_request("after", "query parameter 'after' has bad percent-encoding")));
      after = std::move(value);
    } else if (!key.empty()) {
      return respond(to_response(bad_request(clip_input(key), "unknown query parameter '" + clip_input(key) + "' (known: limit, after)")));
    }
  }
  auto self = shared_from_this();
  bool queued = blocking_.submit([self, scope = ctx.document_scope(), after, limit, rid = ctx.id, respond] {
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = api->list(scope, after, limit);
    if (!res.ok()) return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s, rid)));
    JsonWriter w;
    w.begin_object().key("object").value("list").key("data").begin_array();
    for (const auto& d : res->documents) {
      w.begin_object().key("id").value(d.id).key("title").value(d.title).key("source").value(d.source);
      w.key("shared").value(d.tenant.empty()).key("bytes").value(d.bytes);
      w.key("chunks").value(static_cast<uint64_t>(d.chunks)).end_object();
    }
    w.end_array().key("has_more").value(res->has_more).end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "document queue is full", "", {{"Retry-After", "1"}}}));
}

void ApiImpl::documents_delete(const ReqCtx& ctx, const std::string& id, Responder respond) {
  auto self = shared_from_this();
  bool queued = blocking_.submit([self, id, scope = ctx.document_scope(), rid = ctx.id, respond] {
    pipelines::DocumentApi* api = self->documents();
    if (!api) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    Status st = api->remove(id, scope);
    if (!st.ok()) {
      if (st.code() == StatusCode::kNotFound) return respond(to_response(document_not_found(id)));
      return respond(to_response(from_status(st, self->cfg_.limits.retry_after_s, rid)));
    }
    log::daemon()->info("{} deleted document '{}'", rid, clip_input(id));
    JsonWriter w;
    w.begin_object().key("id").value(id).key("deleted").value(true).end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "document queue is full", "", {{"Retry-After", "1"}}}));
}

}  // namespace ragd::daemon
