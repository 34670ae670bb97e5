// The request fields the OpenAI completion routes take (openai_fields.h).
#include "openai_fields.h"

#include "ragd/pipelines/run_params.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace ragd::daemon {

namespace {

using namespace std::string_view_literals;

// Besides the run parameter table's rows that have an OpenAI name (pipelines::run_param_defs():
// the sampling parameters, max_tokens and max_completion_tokens, seed, stop, stop_token_ids,
// ignore_eos, cache_salt, speculative_k, the RAG extensions retrieval_top_k, retrieval_mode,
// min_score_ratio and filter).
constexpr std::array kBoth = {
    "model"sv, "n"sv, "best_of"sv, "logprobs"sv, "stream"sv, "stream_options"sv,
    // RAG extension
    "pipeline"sv,
    // structured output (openai_structured.h)
    "response_format"sv, "guided_json"sv, "guided_regex"sv, "guided_choice"sv, "guided_whitespace_max"sv};
constexpr std::array kChatOnly = {"messages"sv, "top_logprobs"sv, "tools"sv, "tool_choice"sv, "parallel_tool_calls"sv};
// echo (false only) and suffix (refused with its own message) are parsed by parse_openai_request.
constexpr std::array kCompletionsOnly = {"prompt"sv, "echo"sv, "suffix"sv};
// Accepted and ignored: they ask for nothing a ragd answer would change.
constexpr std::array kIgnored = {"user"sv, "store"sv, "metadata"sv, "service_tier"sv};
// Defined by OpenAI or vLLM, not honoured here.
constexpr std::array kNotImplemented = {
    "logit_bias"sv, "functions"sv, "function_call"sv, "audio"sv, "modalities"sv,
    "prediction"sv, "reasoning_effort"sv, "web_search_options"sv, "min_tokens"sv, "use_beam_search"sv,
    "length_penalty"sv, "prompt_logprobs"sv, "guided_grammar"sv, "guided_decoding_backend"sv, "structured_outputs"sv,
    "chat_template"sv, "chat_template_kwargs"sv, "documents"sv, "add_generation_prompt"sv, "continue_final_message"sv,
    "add_special_tokens"sv, "skip_special_tokens"sv, "spaces_between_special_tokens"sv, "include_stop_str_in_output"sv,
    "truncate_prompt_tokens"sv, "priority"sv, "request_id"sv, "return_tokens_as_token_ids"sv, "allowed_token_ids"sv,
    "bad_words"sv, "logits_processors"sv, "kv_transfer_params"sv, "vllm_xargs"sv};

template <size_t N>
bool in(const std::array<std::string_view, N>& a, std::string_view k) {
  return std::find(a.begin(), a.end(), k) != a.end();
}

}  // namespace

ApiError check_request_fields(const Fields& f, bool chat) {
  for (auto [k, v] : f.object()) {
    if (v.is_null()) continue;  // null is absent, as Fields reads it
    if (k == "logit_bias" && v.type() == simdjson::dom::element_type::OBJECT && v.get_object().size() == 0) continue;  // no bias
    if (in(kBoth, k) || in(kIgnored, k) || (chat ? in(kChatOnly, k) : in(kCompletionsOnly, k))) continue;
    if (pipelines::find_run_param(pipelines::RunRoute::kOpenAi, k)) continue;
    const std::string field = clip_input(k);
    if (in(kNotImplemented, k))
      return bad_request(field, "field '" + field + "' is not implemented by ragd (docs/api.md lists the fields it takes)");
    if (!chat && in(kChatOnly, k))
      return bad_request(field, "field '" + field + "' belongs to /v1/chat/completions, not /v1/completions");
    if (chat && in(kCompletionsOnly, k))
      return bad_request(field, "field '" + field + "' belongs to /v1/completions, not /v1/chat/completions");
    return bad_request(field, "unknown field '" + field + "' (docs/api.md lists the fields ragd takes)");
  }
  return {};
}

}  // namespace ragd::daemon
