// OpenAI-compatible routes: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models.
// Unknown request fields are ignored (SDKs send extras); known ones are type- and range-checked.
// Extension fields: "pipeline" (retrieval through a ragd pipeline; the last user message is the
// query) and "retrieval_top_k"; responses then carry "ragd": {"sources", "timings", "usage"}.
#include <cstring>

#include "api_impl.h"
#include "ragd/common/log.h"
#include "run_events.h"

namespace ragd::daemon {

using pipelines::RunEvent;

namespace {

std::string base64(const uint8_t* p, size_t n) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < n; i += 3) {
    uint32_t v = (p[i] << 16) | (p[i + 1] << 8) | p[i + 2];
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += k[v & 63];
  }
  if (i + 1 == n) {
    uint32_t v = p[i] << 16;
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == n) {
    uint32_t v = (p[i] << 16) | (p[i + 1] << 8);
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += k[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ApiError parse_content(simdjson::dom::element el, const std::string& where, std::string* out) {
  std::string_view sv;
  if (!el.get_string().get(sv)) {
    *out = std::string(sv);
    return {};
  }
  simdjson::dom::array parts;
  if (el.get_array().get(parts)) return bad_request(where, "field '" + where + "' must be a string or an array of text parts");
  size_t i = 0;
  for (auto part : parts) {
    simdjson::dom::object po;
    std::string pw = where + "[" + std::to_string(i++) + "]";
    if (part.get_object().get(po)) return bad_request(pw, "field '" + pw + "' must be an object");
    Fields pf(po, pw + ".");
    std::string type, text;
    if (auto e = pf.str("type", &type, true); e.failed()) return e;
    if (type != "text") return bad_request(pw + ".type", "only text content parts are supported, got '" + type + "'");
    if (auto e = pf.str("text", &text, true); e.failed()) return e;
    *out += text;
  }
  return {};
}

struct OaiState {
  std::mutex mu;
  bool chat = true;
  std::string id, model;
  int64_t created = 0;
  bool include_usage = false;
  int want_logprobs = 0;  // chat: 1 when logprobs; completions: the requested number
  std::string output;
  std::vector<pipelines::Source> sources;
  std::vector<std::pair<std::string, float>> tokens;
  bool sent_role = false;
};

void write_oai_usage(JsonWriter& w, const pipelines::Usage& u) {
  w.begin_object().key("prompt_tokens").value(u.prompt_tokens).key("completion_tokens").value(u.completion_tokens);
  w.key("total_tokens").value(u.prompt_tokens + u.completion_tokens);
  w.key("prompt_tokens_details").begin_object().key("cached_tokens").value(u.reused_hbm + u.reused_dram + u.reused_ssd).end_object();
  w.end_object();
}

void write_token_logprob(JsonWriter& w, const std::string& text, float lp) {
  w.begin_object().key("token").value(text).key("logprob").value(lp).key("bytes").begin_array();
  for (unsigned char c : text) w.value(static_cast<int>(c));
  w.end_array().key("top_logprobs").begin_array();
  w.begin_object().key("token").value(text).key("logprob").value(lp).key("bytes").begin_array();
  for (unsigned char c : text) w.value(static_cast<int>(c));
  w.end_array().end_object();
  w.end_array().end_object();
}

void write_completion_logprobs(JsonWriter& w, const std::vector<std::pair<std::string, float>>& toks) {
  w.begin_object().key("tokens").begin_array();
  for (const auto& t : toks) w.value(t.first);
  w.end_array().key("token_logprobs").begin_array();
  for (const auto& t : toks) w.value(t.second);
  w.end_array().key("top_logprobs").begin_array();
  for (const auto& t : toks) w.begin_object().key(t.first).value(t.second).end_object();
  w.end_array().key("text_offset").begin_array();
  size_t off = 0;
  for (const auto& t : toks) {
    w.value(static_cast<uint64_t>(off));
    off += t.first.size();
  }
  w.end_array().end_object();
}

// One streaming chunk. `delta_text` null = no content; `finish` "" = null.
std::string chunk_json(const OaiState& s, const std::string* delta_text, bool role, const std::string& finish,
                       const std::pair<std::string, float>* lp) {
  JsonWriter w;
  w.begin_object().key("id").value(s.id).key("object").value(s.chat ? "chat.completion.chunk" : "text_completion");
  w.key("created").value(s.created).key("model").value(s.model).key("choices").begin_array().begin_object();
  w.key("index").value(0);
  if (s.chat) {
    w.key("delta").begin_object();
    if (role) w.key("role").value("assistant");
    if (delta_text) w.key("content").value(*delta_text);
    w.end_object();
    if (lp) {
      w.key("logprobs").begin_object().key("content").begin_array();
      write_token_logprob(w, lp->first, lp->second);
      w.end_array().end_object();
    } else {
      w.key("logprobs").null();
    }
  } else {
    w.key("text").value(delta_text ? *delta_text : std::string());
    if (lp) write_completion_logprobs(w, {*lp});
    else w.key("logprobs").null();
  }
  if (finish.empty()) w.key("finish_reason").null();
  else w.key("finish_reason").value(finish);
  w.end_object().end_array().end_object();
  return w.take();
}

}  // namespace

void ApiImpl::chat_completions(const ReqCtx& ctx, const HttpRequest& req, Responder respond, bool chat) {
  simdjson::dom::object obj;
  if (auto e = parse_object(req.body, &obj); e.failed()) return respond(to_response(e));
  Fields f(obj);
  pipelines::Executor* ex = executor();
  const std::string model_name = ex->model_name();
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  if (!model.empty() && model != model_name && model != "ragd")
    return respond(to_response({404, "model_not_found", "model '" + model + "' is not served here (serving '" + model_name + "')", "model", {}}));

  pipelines::RunRequest run;
  run.id = ctx.id;
  run.tenant = ctx.tenant;
  if (chat) {
    auto msgs = f.get("messages");
    simdjson::dom::array arr;
    if (!msgs) return respond(to_response(bad_request("messages", "field 'messages' is required")));
    if (msgs->get_array().get(arr)) return respond(to_response(bad_request("messages", "field 'messages' must be an array")));
    size_t i = 0;
    for (auto m : arr) {
      std::string where = "messages[" + std::to_string(i++) + "]";
      simdjson::dom::object mo;
      if (m.get_object().get(mo)) return respond(to_response(bad_request(where, "field '" + where + "' must be an object")));
      Fields mf(mo, where + ".");
      engine::ChatMessage cm;
      if (auto e = mf.str("role", &cm.role, true); e.failed()) return respond(to_response(e));
      if (cm.role == "developer") cm.role = "system";
      if (cm.role != "system" && cm.role != "user" && cm.role != "assistant")
        return respond(to_response(bad_request(where + ".role", "field '" + where + ".role' must be system, user or assistant; got '" + cm.role + "'")));
      auto content = mf.get("content");
      if (!content) return respond(to_response(bad_request(where + ".content", "field '" + where + ".content' is required")));
      if (auto e = parse_content(*content, where + ".content", &cm.content); e.failed()) return respond(to_response(e));
      run.messages.push_back(std::move(cm));
    }
    if (run.messages.empty()) return respond(to_response(bad_request("messages", "field 'messages' must not be empty")));
  } else {
    auto p = f.get("prompt");
    if (!p) return respond(to_response(bad_request("prompt", "field 'prompt' is required")));
    std::string_view sv;
    simdjson::dom::array arr;
    if (!p->get_string().get(sv)) {
      run.prompt = std::string(sv);
    } else if (!p->get_array().get(arr) && arr.size() == 1 && !arr.at(0).get_string().get(sv)) {
      run.prompt = std::string(sv);
    } else {
      return respond(to_response(bad_request("prompt", "field 'prompt' must be a string (or an array of exactly one string)")));
    }
    bool echo = false;
    if (auto e = f.boolean("echo", &echo); e.failed()) return respond(to_response(e));
    if (echo) return respond(to_response(bad_request("echo", "'echo' is not supported")));
    if (f.has("suffix")) return respond(to_response(bad_request("suffix", "'suffix' is not supported")));
  }
  int64_t iv = 0;
  bool present = false;
  if (auto e = f.integer("n", &iv, 1, 1, &present); e.failed()) return respond(to_response(bad_request("n", "only n = 1 is supported")));
  if (auto e = f.integer("best_of", &iv, 1, 1, &present); e.failed()) return respond(to_response(bad_request("best_of", "only best_of = 1 is supported")));
  int max_tokens = -1;
  if (auto e = f.integer("max_tokens", &iv, 1, 1 << 20, &present); e.failed()) return respond(to_response(e));
  if (present) max_tokens = static_cast<int>(iv);
  if (auto e = f.integer("max_completion_tokens", &iv, 1, 1 << 20, &present); e.failed()) return respond(to_response(e));
  if (present) max_tokens = static_cast<int>(iv);
  double d = 0;
  auto& sp = run.sampling;
  if (auto e = f.number("temperature", &d, 0.0, 2.0, &present); e.failed()) return respond(to_response(e));
  sp.temperature = present ? static_cast<float>(d) : 1.0f;  // OpenAI default
  if (auto e = f.number("top_p", &d, 1e-9, 1.0, &present); e.failed()) return respond(to_response(e));
  if (present) sp.top_p = static_cast<float>(d);
  if (auto e = f.number("presence_penalty", &d, -2.0, 2.0, &present); e.failed()) return respond(to_response(e));
  if (present) sp.presence_penalty = static_cast<float>(d);
  if (auto e = f.number("frequency_penalty", &d, -2.0, 2.0, &present); e.failed()) return respond(to_response(e));
  if (present) sp.frequency_penalty = static_cast<float>(d);
  if (auto e = f.number("repetition_penalty", &d, 0.01, 10.0, &present); e.failed()) return respond(to_response(e));
  if (present) sp.repetition_penalty = static_cast<float>(d);
  if (auto e = f.number("min_p", &d, 0.0, 1.0, &present); e.failed()) return respond(to_response(e));
  if (present) sp.min_p = static_cast<float>(d);
  if (auto e = f.integer("top_k", &iv, 0, 1 << 20, &present); e.failed()) return respond(to_response(e));
  if (present) sp.top_k = static_cast<int>(iv);
  if (auto e = f.integer("seed", &iv, INT64_MIN, INT64_MAX, &present); e.failed()) return respond(to_response(e));
  if (present) sp.seed = static_cast<uint64_t>(iv);
  if (auto el = f.get("stop")) {
    std::string_view sv;
    simdjson::dom::array arr;
    if (!el->get_string().get(sv)) {
      sp.stop.emplace_back(sv);
    } else if (!el->get_array().get(arr)) {
      for (auto s : arr) {
        if (s.get_string().get(sv)) return respond(to_response(bad_request("stop", "field 'stop' must be a string or an array of strings")));
        sp.stop.emplace_back(sv);
      }
      if (sp.stop.size() > 4) return respond(to_response(bad_request("stop", "field 'stop' has more than 4 sequences")));
    } else {
      return respond(to_response(bad_request("stop", "field 'stop' must be a string or an array of strings")));
    }
    for (const auto& s : sp.stop)
      if (s.empty()) return respond(to_response(bad_request("stop", "field 'stop' contains an empty string")));
  }
  auto st = std::make_shared<OaiState>();
  st->chat = chat;
  st->id = (chat ? "chatcmpl-" : "cmpl-") + ctx.id;
  st->model = model_name;
  st->created = unix_now();
  if (chat) {
    bool lp = false;
    if (auto e = f.boolean("logprobs", &lp); e.failed()) return respond(to_response(e));
    if (auto e = f.integer("top_logprobs", &iv, 0, 20, &present); e.failed()) return respond(to_response(e));
    st->want_logprobs = lp ? 1 : 0;
  } else {
    if (auto e = f.integer("logprobs", &iv, 0, 5, &present); e.failed()) return respond(to_response(e));
    st->want_logprobs = present ? 1 : 0;
  }
  run.want_logprobs = st->want_logprobs > 0;
  bool stream = false;
  if (auto e = f.boolean("stream", &stream); e.failed()) return respond(to_response(e));
  if (auto so = f.get("stream_options")) {
    simdjson::dom::object soo;
    if (so->get_object().get(soo)) return respond(to_response(bad_request("stream_options", "field 'stream_options' must be an object")));
    if (auto e = Fields(soo, "stream_options.").boolean("include_usage", &st->include_usage); e.failed()) return respond(to_response(e));
  }
  // Extension: retrieval through a pipeline.
  if (auto e = f.str("pipeline", &run.pipeline); e.failed()) return respond(to_response(e));
  if (auto e = f.integer("retrieval_top_k", &iv, 1, 1000, &present); e.failed()) return respond(to_response(e));
  if (present) run.top_k = static_cast<int>(iv);
  if (!run.pipeline.empty()) {
    bool found = false;
    for (const auto& p : ex->pipelines()) {
      if (p.name != run.pipeline) continue;
      found = true;
      if (max_tokens < 0) max_tokens = p.max_tokens;
    }
    if (!found) return respond(to_response({404, "pipeline_not_found", "unknown pipeline '" + run.pipeline + "'", "pipeline", {}}));
    if (chat) {
      for (auto it = run.messages.rbegin(); it != run.messages.rend(); ++it)
        if (it->role == "user") {
          run.query = it->content;
          break;
        }
      if (run.query.empty()) return respond(to_response(bad_request("messages", "a pipeline run needs a non-empty user message as its query")));
    } else {
      run.query = run.prompt;
    }
  }
  sp.max_tokens = max_tokens > 0 ? max_tokens : 256;
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(run.tenant, &slot); e.failed()) return respond(to_response(e));
  log::daemon()->info("{} {} model={} pipeline='{}' stream={} max_tokens={} temperature={}", ctx.id,
                      chat ? "chat completion" : "completion", model_name, run.pipeline, stream, sp.max_tokens, sp.temperature);

  if (stream) {
    auto bridge = std::make_shared<SseBridge>();
    const std::string rid = ctx.id;
    ApiError e = start_run(std::move(run), ctx.route, std::move(slot), [bridge, st](const RunEvent& ev) {
      std::string out;
      switch (ev.kind) {
        case RunEvent::Kind::kSources: {
          JsonWriter w;
          w.begin_object().key("id").value(st->id).key("object").value(st->chat ? "chat.completion.chunk" : "text_completion");
          w.key("created").value(st->created).key("model").value(st->model).key("choices").begin_array().end_array();
          w.key("ragd").begin_object().key("sources");
          write_sources(w, ev.sources);
          w.end_object().end_object();
          out = sse_frame(nullptr, w.str());
          break;
        }
        case RunEvent::Kind::kToken: {
          if (st->chat && !st->sent_role) {
            static const std::string kEmpty;
            out += sse_frame(nullptr, chunk_json(*st, &kEmpty, true, "", nullptr));
            st->sent_role = true;
          }
          std::pair<std::string, float> lp{ev.text, ev.logprob};
          if (!ev.text.empty() || st->want_logprobs)
            out += sse_frame(nullptr, chunk_json(*st, &ev.text, false, "", st->want_logprobs ? &lp : nullptr));
          break;
        }
        case RunEvent::Kind::kDone: {
          if (st->chat && !st->sent_role) {
            static const std::string kEmpty;
            out += sse_frame(nullptr, chunk_json(*st, &kEmpty, true, "", nullptr));
          }
          out += sse_frame(nullptr, chunk_json(*st, nullptr, false, ev.finish_reason.empty() ? "stop" : ev.finish_reason, nullptr));
          if (st->include_usage) {
            JsonWriter w;
            w.begin_object().key("id").value(st->id).key("object").value(st->chat ? "chat.completion.chunk" : "text_completion");
            w.key("created").value(st->created).key("model").value(st->model).key("choices").begin_array().end_array();
            w.key("usage");
            write_oai_usage(w, ev.usage);
            w.key("ragd").begin_object().key("usage");
            write_usage(w, ev.usage);
            w.key("timings");
            write_timings(w, ev.timings);
            w.end_object().end_object();
            out += sse_frame(nullptr, w.str());
          }
          out += "data: [DONE]\n\n";
          break;
        }
        case RunEvent::Kind::kError: {
          ApiError err = from_status(ev.error, 1);
          HttpResponse r = to_response(err);
          out = sse_frame(nullptr, r.body) + "data: [DONE]\n\n";
          break;
        }
      }
      bool ok = out.empty() ? true : bridge->send(std::move(out));
      if (ev.kind == RunEvent::Kind::kDone || ev.kind == RunEvent::Kind::kError) bridge->finish();
      return ok;
    });
    if (e.failed()) return respond(to_response(e));
    return respond(sse_response(bridge, rid));
  }

  ApiError e = start_run(std::move(run), ctx.route, std::move(slot), [st, respond](const RunEvent& ev) {
    std::lock_guard<std::mutex> l(st->mu);
    switch (ev.kind) {
      case RunEvent::Kind::kSources: st->sources = ev.sources; break;
      case RunEvent::Kind::kToken:
        st->output += ev.text;
        if (st->want_logprobs) st->tokens.emplace_back(ev.text, ev.logprob);
        break;
      case RunEvent::Kind::kError: respond(to_response(from_status(ev.error, 1))); break;
      case RunEvent::Kind::kDone: {
        JsonWriter w;
        w.begin_object().key("id").value(st->id).key("object").value(st->chat ? "chat.completion" : "text_completion");
        w.key("created").value(st->created).key("model").value(st->model).key("choices").begin_array().begin_object();
        w.key("index").value(0);
        if (st->chat) {
          w.key("message").begin_object().key("role").value("assistant").key("content").value(st->output).end_object();
          if (st->want_logprobs) {
            w.key("logprobs").begin_object().key("content").begin_array();
            for (const auto& t : st->tokens) write_token_logprob(w, t.first, t.second);
            w.end_array().end_object();
          } else {
            w.key("logprobs").null();
          }
        } else {
          w.key("text").value(st->output);
          if (st->want_logprobs) {
            w.key("logprobs");
            write_completion_logprobs(w, st->tokens);
          } else {
            w.key("logprobs").null();
          }
        }
        w.key("finish_reason").value(ev.finish_reason.empty() ? "stop" : ev.finish_reason);
        w.end_object().end_array();
        w.key("usage");
        write_oai_usage(w, ev.usage);
        w.key("ragd").begin_object().key("sources");
        write_sources(w, st->sources);
        w.key("usage");
        write_usage(w, ev.usage);
        w.key("timings");
        write_timings(w, ev.timings);
        w.end_object().end_object();
        HttpResponse r;
        r.body = w.take();
        respond(std::move(r));
        break;
      }
    }
    return true;
  });
  if (e.failed()) respond(to_response(e));
}

void ApiImpl::embeddings(const ReqCtx& ctx, const HttpRequest& req, Responder respond) {
  simdjson::dom::object obj;
  if (auto e = parse_object(req.body, &obj); e.failed()) return respond(to_response(e));
  Fields f(obj);
  const std::string model_name = executor()->model_name();
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  if (!model.empty() && model != model_name && model != "ragd")
    return respond(to_response({404, "model_not_found", "model '" + model + "' is not served here (serving '" + model_name + "')", "model", {}}));
  auto in = f.get("input");
  if (!in) return respond(to_response(bad_request("input", "field 'input' is required")));
  std::vector<std::string> texts;
  std::string_view sv;
  simdjson::dom::array arr;
  if (!in->get_string().get(sv)) {
    texts.emplace_back(sv);
  } else if (!in->get_array().get(arr)) {
    size_t i = 0;
    for (auto el : arr) {
      if (el.get_string().get(sv))
        return respond(to_response(bad_request("input[" + std::to_string(i) + "]",
                                               "field 'input[" + std::to_string(i) + "]' must be a string (token-id inputs are not supported)")));
      texts.emplace_back(sv);
      ++i;
    }
  } else {
    return respond(to_response(bad_request("input", "field 'input' must be a string or an array of strings")));
  }
  if (texts.empty()) return respond(to_response(bad_request("input", "field 'input' must not be empty")));
  if (texts.size() > 2048) return respond(to_response(bad_request("input", "field 'input' has more than 2048 entries")));
  for (size_t i = 0; i < texts.size(); ++i)
    if (texts[i].empty())
      return respond(to_response(bad_request("input[" + std::to_string(i) + "]", "field 'input[" + std::to_string(i) + "]' must not be empty")));
  std::string format = "float";
  if (auto e = f.str("encoding_format", &format); e.failed()) return respond(to_response(e));
  if (format != "float" && format != "base64")
    return respond(to_response(bad_request("encoding_format", "field 'encoding_format' must be float or base64; got '" + format + "'")));
  int64_t dims = 0;
  bool has_dims = false;
  if (auto e = f.integer("dimensions", &dims, 1, 1 << 16, &has_dims); e.failed()) return respond(to_response(e));
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(ctx.tenant, &slot); e.failed()) return respond(to_response(e));
  auto self = shared_from_this();
  bool queued = blocking_.submit([self, texts = std::move(texts), format, dims, has_dims, model_name, respond, slot]() {
    pipelines::DocumentApi* docs = self->documents();
    if (!docs) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = docs->embed(texts);
    if (!res.ok()) return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s)));
    const auto& vecs = *res;
    if (has_dims && !vecs.empty() && static_cast<int64_t>(vecs[0].size()) != dims)
      return respond(to_response(bad_request("dimensions", "this embedder produces " + std::to_string(vecs[0].size()) +
                                                               " dimensions; got dimensions = " + std::to_string(dims))));
    int64_t words = 0;
    for (const auto& t : texts) {
      bool in_word = false;
      for (char c : t) {
        bool sp = std::isspace(static_cast<unsigned char>(c));
        if (!sp && !in_word) ++words;
        in_word = !sp;
      }
    }
    JsonWriter w;
    w.begin_object().key("object").value("list").key("data").begin_array();
    for (size_t i = 0; i < vecs.size(); ++i) {
      w.begin_object().key("object").value("embedding").key("index").value(static_cast<uint64_t>(i)).key("embedding");
      if (format == "base64") {
        w.value(base64(reinterpret_cast<const uint8_t*>(vecs[i].data()), vecs[i].size() * sizeof(float)));
      } else {
        w.begin_array();
        for (float x : vecs[i]) w.value(x);
        w.end_array();
      }
      w.end_object();
    }
    w.end_array().key("model").value(model_name);
    // The daemon has no tokenizer for the embedder: usage counts whitespace-separated words.
    w.key("usage").begin_object().key("prompt_tokens").value(words).key("total_tokens").value(words).end_object();
    w.end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "embedding queue is full", "", {{"Retry-After", "1"}}}));
}

void ApiImpl::models(const ReqCtx& ctx, const std::string& id, Responder respond) {
  const std::string name = executor()->model_name();
  auto write_model = [&](JsonWriter& w) {
    w.begin_object().key("id").value(name).key("object").value("model").key("created").value(created_unix_);
    w.key("owned_by").value("ragd").end_object();
  };
  JsonWriter w;
  if (id.empty()) {
    w.begin_object().key("object").value("list").key("data").begin_array();
    write_model(w);
    w.end_array().end_object();
  } else {
    if (id != name) return respond(to_response({404, "model_not_found", "model '" + id + "' is not served here", "model", {}}));
    write_model(w);
  }
  HttpResponse r;
  r.body = w.take();
  respond(std::move(r));
}

}  // namespace ragd::daemon
