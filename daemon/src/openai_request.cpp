// Parsing of OpenAI-compatible completion requests.
#include "openai_encode.h"

namespace ragd::daemon {

namespace {

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
    if (type != "text") return bad_request(pw + ".type", "only text content parts are supported, got '" + clip_input(type) + "'");
    if (auto e = pf.str("text", &text, true); e.failed()) return e;
    *out += text;
  }
  return {};
}

}  // namespace

ApiError parse_openai_request(const Fields& f, bool chat, const std::vector<pipelines::PipelineInfo>& pipelines,
                              OaiRequest* out) {
  pipelines::RunRequest& run = out->run;
  if (chat) {
    auto msgs = f.get("messages");
    simdjson::dom::array arr;
    if (!msgs) return bad_request("messages", "field 'messages' is required");
    if (msgs->get_array().get(arr)) return bad_request("messages", "field 'messages' must be an array");
    size_t i = 0;
    for (auto m : arr) {
      std::string where = "messages[" + std::to_string(i++) + "]";
      simdjson::dom::object mo;
      if (m.get_object().get(mo)) return bad_request(where, "field '" + where + "' must be an object");
      Fields mf(mo, where + ".");
      engine::ChatMessage cm;
      if (auto e = mf.str("role", &cm.role, true); e.failed()) return e;
      if (cm.role == "developer") cm.role = "system";
      if (cm.role != "system" && cm.role != "user" && cm.role != "assistant")
        return bad_request(where + ".role", "field '" + where + ".role' must be system, user or assistant; got '" + clip_input(cm.role) + "'");
      auto content = mf.get("content");
      if (!content) return bad_request(where + ".content", "field '" + where + ".content' is required");
      if (auto e = parse_content(*content, where + ".content", &cm.content); e.failed()) return e;
      run.messages.push_back(std::move(cm));
    }
    if (run.messages.empty()) return bad_request("messages", "field 'messages' must not be empty");
  } else {
    auto p = f.get("prompt");
    if (!p) return bad_request("prompt", "field 'prompt' is required");
    std::string_view sv;
    simdjson::dom::array arr;
    if (!p->get_string().get(sv)) {
      run.prompt = std::string(sv);
    } else if (!p->get_array().get(arr) && arr.size() == 1 && !arr.at(0).get_string().get(sv)) {
      run.prompt = std::string(sv);
    } else {
      return bad_request("prompt", "field 'prompt' must be a string (or an array of exactly one string)");
    }
    bool echo = false;
    if (auto e = f.boolean("echo", &echo); e.failed()) return e;
    if (echo) return bad_request("echo", "'echo' is not supported");
    if (f.has("suffix")) return bad_request("suffix", "'suffix' is not supported");
  }
  int64_t iv = 0;
  bool present = false;
  if (auto e = f.integer("n", &iv, 1, 1, &present); e.failed()) return bad_request("n", "only n = 1 is supported");
  if (auto e = f.integer("best_of", &iv, 1, 1, &present); e.failed()) return bad_request("best_of", "only best_of = 1 is supported");
  int max_tokens = -1;
  if (auto e = f.integer("max_tokens", &iv, 1, 1 << 20, &present); e.failed()) return e;
  if (present) max_tokens = static_cast<int>(iv);
  if (auto e = f.integer("max_completion_tokens", &iv, 1, 1 << 20, &present); e.failed()) return e;
  if (present) max_tokens = static_cast<int>(iv);
  double d = 0;
  auto& sp = run.sampling;
  if (auto e = f.number("temperature", &d, 0.0, 2.0, &present); e.failed()) return e;
  sp.temperature = present ? static_cast<float>(d) : 1.0f;  // OpenAI default
  if (auto e = f.number("top_p", &d, 1e-9, 1.0, &present); e.failed()) return e;
  if (present) sp.top_p = static_cast<float>(d);
  if (auto e = f.number("presence_penalty", &d, -2.0, 2.0, &present); e.failed()) return e;
  if (present) sp.presence_penalty = static_cast<float>(d);
  if (auto e = f.number("frequency_penalty", &d, -2.0, 2.0, &present); e.failed()) return e;
  if (present) sp.frequency_penalty = static_cast<float>(d);
  if (auto e = f.number("repetition_penalty", &d, 0.01, 10.0, &present); e.failed()) return e;
  if (present) sp.repetition_penalty = static_cast<float>(d);
  if (auto e = f.number("min_p", &d, 0.0, 1.0, &present); e.failed()) return e;
  if (present) sp.min_p = static_cast<float>(d);
  if (auto e = f.integer("top_k", &iv, 0, 1 << 20, &present); e.failed()) return e;
  if (present) sp.top_k = static_cast<int>(iv);
  bool has_seed = false;
  if (auto e = f.seed("seed", &sp.seed, &has_seed); e.failed()) return e;
  if (auto e = f.string_list("stop", &sp.stop); e.failed()) return e;
  if (sp.stop.size() > 4) return bad_request("stop", "field 'stop' has more than 4 sequences");
  for (const auto& s : sp.stop)
    if (s.empty()) return bad_request("stop", "field 'stop' contains an empty string");
  if (chat) {
    bool lp = false;
    if (auto e = f.boolean("logprobs", &lp); e.failed()) return e;
    if (auto e = f.integer("top_logprobs", &iv, 0, 20, &present); e.failed()) return e;
    out->want_logprobs = lp ? 1 : 0;
  } else {
    if (auto e = f.integer("logprobs", &iv, 0, 5, &present); e.failed()) return e;
    out->want_logprobs = present ? 1 : 0;
  }
  run.want_logprobs = out->want_logprobs > 0;
  if (auto e = f.boolean("stream", &out->stream); e.failed()) return e;
  if (auto so = f.get("stream_options")) {
    simdjson::dom::object soo;
    if (so->get_object().get(soo)) return bad_request("stream_options", "field 'stream_options' must be an object");
    if (auto e = Fields(soo, "stream_options.").boolean("include_usage", &out->include_usage); e.failed()) return e;
  }
  // Extension: retrieval through a pipeline.
  if (auto e = f.str("pipeline", &run.pipeline); e.failed()) return e;
  if (auto e = f.integer("retrieval_top_k", &iv, kRetrievalTopKMin, kRetrievalTopKMax, &present); e.failed()) return e;
  if (present) run.top_k = static_cast<int>(iv);
  if (!run.pipeline.empty()) {
    // Pipeline runs take the spec's generation defaults unless the request sets a value; OpenAI's
    // own default temperature (1.0) counts as set, as it does for plain completions.
    run.overrides.temperature = sp.temperature;
    if (max_tokens > 0) run.overrides.max_tokens = max_tokens;
    if (f.has("top_p")) run.overrides.top_p = sp.top_p;
    if (f.has("top_k")) run.overrides.top_k = sp.top_k;
    if (has_seed) run.overrides.seed = sp.seed;
    if (f.has("stop")) run.overrides.stop = sp.stop;
    bool found = false;
    for (const auto& p : pipelines) {
      if (p.name != run.pipeline) continue;
      found = true;
      if (max_tokens < 0) max_tokens = p.max_tokens;
    }
    if (!found) return {404, "pipeline_not_found", "unknown pipeline '" + clip_input(run.pipeline) + "'", "pipeline", {}};
    if (chat) {
      for (auto it = run.messages.rbegin(); it != run.messages.rend(); ++it)
        if (it->role == "user") {
          run.query = it->content;
          break;
        }
      if (run.query.empty()) return bad_request("messages", "a pipeline run needs a non-empty user message as its query");
    } else {
      run.query = run.prompt;
    }
  }
  sp.max_tokens = max_tokens > 0 ? max_tokens : 256;
  return {};
}

}  // namespace ragd::daemon
