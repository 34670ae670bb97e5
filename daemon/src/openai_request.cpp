// Parsing of OpenAI-compatible completion requests.
#include "openai_encode.h"
#include "openai_structured.h"
#include "openai_tools.h"
#include "ragd/pipelines/run_params.h"
#include "run_param_decode.h"

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

// One prompt of /v1/completions: a string or token ids.
ApiError parse_prompt(simdjson::dom::element el, const std::string& where, OaiRequest::Prompt* out) {
  std::string_view sv;
  simdjson::dom::array ids;
  if (!el.get_string().get(sv)) {
    out->text = std::string(sv);
    return {};
  }
  if (el.get_array().get(ids)) return bad_request(where, "field '" + where + "' must be a string or an array of token ids");
  size_t k = 0;
  for (auto t : ids) {
    int64_t v = 0;
    if (t.get_int64().get(v) || v < 0 || v > INT32_MAX)
      return bad_request(where, "field '" + where + "[" + std::to_string(k) + "]' must be a token id (an integer >= 0)");
    out->ids.push_back(static_cast<int32_t>(v));
    ++k;
  }
  if (out->ids.empty()) return bad_request(where, "field '" + where + "' must not be an empty array of token ids");
  return {};
}

// `prompt` as OpenAI takes it: a string, token ids, or an array of strings or of token-id arrays
// (one choice per prompt and n).
ApiError parse_prompts(const Fields& f, OaiRequest* out) {
  auto p = f.get("prompt");
  if (!p) return bad_request("prompt", "field 'prompt' is required");
  std::vector<OaiRequest::Prompt> prompts(1);
  simdjson::dom::array arr;
  const bool many = !p->get_array().get(arr) && arr.size() > 0 &&
                    (arr.at(0).type() == simdjson::dom::element_type::STRING || arr.at(0).type() == simdjson::dom::element_type::ARRAY);
  if (!many) {
    if (auto e = parse_prompt(*p, "prompt", &prompts[0]); e.failed()) return e;
  } else {
    prompts.clear();
    size_t i = 0;
    for (auto el : arr) {
      prompts.emplace_back();
      if (auto e = parse_prompt(el, "prompt[" + std::to_string(i++) + "]", &prompts.back()); e.failed()) return e;
    }
  }
  if (prompts.size() > static_cast<size_t>(kMaxChoices))
    return bad_request("prompt", "field 'prompt' has more than " + std::to_string(kMaxChoices) + " prompts");
  out->run.prompt = std::move(prompts[0].text);
  out->run.prompt_ids = std::move(prompts[0].ids);
  out->more_prompts.assign(std::make_move_iterator(prompts.begin() + 1), std::make_move_iterator(prompts.end()));
  return {};
}

}  // namespace

ApiError parse_openai_request(const Fields& f, bool chat, OaiRequest* out) {
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
      if (cm.role != "system" && cm.role != "user" && cm.role != "assistant" && cm.role != "tool")
        return bad_request(where + ".role", "field '" + where + ".role' must be system, user, assistant or tool; got '" + clip_input(cm.role) + "'");
      if (cm.role == "assistant")
        if (auto tc = mf.get("tool_calls"))
          if (auto e = parse_message_tool_calls(*tc, where + ".tool_calls", &cm.tool_calls); e.failed()) return e;
      if (cm.role == "tool") {
        if (auto e = mf.str("tool_call_id", &cm.tool_call_id, true); e.failed()) return e;
        if (auto e = mf.str("name", &cm.name); e.failed()) return e;
      }
      auto content = mf.get("content");
      // An assistant turn that only calls tools has no content (null or absent), as OpenAI sends it.
      if (!content && !(cm.role == "assistant" && !cm.tool_calls.empty()))
        return bad_request(where + ".content", "field '" + where + ".content' is required");
      if (content)
        if (auto e = parse_content(*content, where + ".content", &cm.content); e.failed()) return e;
      run.messages.push_back(std::move(cm));
    }
    if (run.messages.empty()) return bad_request("messages", "field 'messages' must not be empty");
  } else {
    if (auto e = parse_prompts(f, out); e.failed()) return e;
    bool echo = false;
    if (auto e = f.boolean("echo", &echo); e.failed()) return e;
    if (echo) return bad_request("echo", "'echo' is not supported");
    if (f.has("suffix")) return bad_request("suffix", "'suffix' is not supported");
  }
  int64_t iv = 0;
  bool present = false;
  if (auto e = f.integer("n", &iv, 1, kMaxChoices, &present); e.failed()) return e;
  if (present) out->n = static_cast<int>(iv);
  if (auto e = f.integer("best_of", &iv, 1, kMaxChoices, &present); e.failed()) return e;
  if (present && iv != out->n)
    return bad_request("best_of", "best_of other than n (ranking candidates) is not implemented: got best_of = " +
                                      std::to_string(iv) + ", n = " + std::to_string(out->n));
  if (out->n * (1 + static_cast<int>(out->more_prompts.size())) > kMaxChoices)
    return bad_request("n", "n times the number of prompts must be at most " + std::to_string(kMaxChoices));
  // Every run parameter (the table's rows with an OpenAI name: max_tokens / max_completion_tokens,
  // temperature, top_p, top_k (sampling top-k here; the passages retrieved are retrieval_top_k),
  // min_p, the penalties, seed, stop, stop_token_ids, ignore_eos, cache_salt, speculative_k and the
  // RAG extensions retrieval_top_k, retrieval_mode, min_score_ratio and filter) decodes by its row
  // of the run parameter table: the same types, ranges and messages as on the ragd routes.
  // Generation parameters left unset take a pipeline's defaults (pipelines::resolve_run); a value the
  // client sent wins.
  if (auto e = decode_run_params(f, RunRoute::kOpenAi, &run); e.failed()) return e;
  pipelines::RunSampling& ov = run.sampling;
  // OpenAI's default temperature (1.0) is this route's default: it counts as set, for plain and
  // pipeline runs alike.
  if (!ov.temperature) ov.temperature = 1.0f;
  out->seeded = ov.seed.has_value();
  if (ov.stop) {  // OpenAI's own limits on stop sequences
    if (ov.stop->size() > 4) return bad_request("stop", "field 'stop' has more than 4 sequences");
    for (const auto& st : *ov.stop)
      if (st.empty()) return bad_request("stop", "field 'stop' contains an empty string");
  }
  if (chat) {
    bool lp = false;
    if (auto e = f.boolean("logprobs", &lp); e.failed()) return e;
    if (auto e = f.integer("top_logprobs", &iv, 0, 20, &present); e.failed()) return e;
    if (present && iv > 0 && !lp) return bad_request("top_logprobs", "field 'top_logprobs' needs \"logprobs\": true");
    out->want_logprobs = lp ? 1 : 0;
    if (present) run.top_logprobs = static_cast<int>(iv);
  } else {
    if (auto e = f.integer("logprobs", &iv, 0, 5, &present); e.failed()) return e;
    out->want_logprobs = present ? 1 : 0;
    if (present) run.top_logprobs = static_cast<int>(iv);  // OpenAI: the likeliest `logprobs` tokens
  }
  run.want_logprobs = out->want_logprobs > 0;
  if (auto e = f.boolean("stream", &out->stream); e.failed()) return e;
  if (auto so = f.get("stream_options")) {
    simdjson::dom::object soo;
    if (so->get_object().get(soo)) return bad_request("stream_options", "field 'stream_options' must be an object");
    if (auto e = Fields(soo, "stream_options.").boolean("include_usage", &out->include_usage); e.failed()) return e;
  }
  // Extension: retrieval through a pipeline (retrieval_top_k, retrieval_mode and filter: the table's rows above).
  if (auto e = f.str("pipeline", &run.pipeline); e.failed()) return e;
  // Structured output: response_format / guided_* (openai_structured.h).
  if (auto e = parse_structured_output(f, &run); e.failed()) return e;
  // Tool calling (openai_tools.h).
  if (chat)
    if (auto e = parse_tools(f, &run); e.failed()) return e;
  // The pipeline (this field or the model's id) and its query are set by the route (openai.cpp).
  return {};
}

}  // namespace ragd::daemon
