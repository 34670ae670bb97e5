// Private to the daemon: the OpenAI-compatible request (parsed) and response encoders.
// Thread-safety: OaiState is shared by one run's consumer calls, which the executor makes in order
// from one thread at a time; the non-streaming fields are also guarded by OaiState::mu.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api_impl.h"
#include "openai_citations.h"
#include "openai_tools.h"
#include "run_events.h"

namespace ragd::daemon {

struct OaiGather;  // openai_fanout.h

// A generated token's logprob and its step's likeliest tokens (requests with logprobs).
struct OaiToken {
  std::string text;
  float logprob = 0.0f;
  std::vector<pipelines::TokenLogprob> top;  // best first; empty unless top_logprobs was asked
};

// What an OpenAI response needs besides the run's events: one per choice (one run each).
struct OaiState {
  std::mutex mu;
  bool chat = true;
  int index = 0;                        // the choice's index
  // The request's choices (n > 1, several prompts); null = one. Owned by the request's consumers
  // (the gather owns the states: no cycle).
  OaiGather* gather = nullptr;
  std::string id, model;
  int64_t created = 0;
  bool include_usage = false;
  int want_logprobs = 0;  // chat: 1 when logprobs; completions: the requested number
  std::string output;                                 // guarded by mu (non-streaming)
  std::vector<pipelines::Source> sources;             // guarded by mu (non-streaming)
  // Chat answers of pipelines that number their passages carry url_citation annotations
  // (openai_citations.h): the answer so far and the contexts it was written under, streaming too.
  bool annotate = false;
  // Pipelines with sources_footer: the answer's text ends with its sources (openai_citations.h),
  // numbered "[n]" when the pipeline numbers its passages; the latest context's sources.
  bool footer = false, numbered = false;
  std::vector<pipelines::Source> footer_sources;
  std::string answer;
  std::vector<CitationContext> contexts;
  std::vector<OaiToken> tokens;                       // guarded by mu (non-streaming)
  // Runs with tools (openai_tools.h): how to read calls out of the answer; null without.
  std::shared_ptr<OaiToolState> tools;
  bool sent_role = false;                             // streaming: events arrive in order
  // The run's end (guarded by mu; read by the gather once every run has ended).
  std::string finish;
  pipelines::Usage usage;
  pipelines::Timings timings;
};

// Choices one request may ask for: n times the prompts. Each is a run.
inline constexpr int kMaxChoices = 16;

// A parsed /v1/chat/completions or /v1/completions body.
struct OaiRequest {
  pipelines::RunRequest run;  // id and tenant are the caller's to set
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  int want_logprobs = 0;       // chat: 1 when logprobs; completions: 1 when a number was asked
  int n = 1;                   // choices per prompt
  bool seeded = false;         // the request named a seed (choice i then samples with seed + i)
  // /v1/completions with several prompts: the second and later ones (`run` holds the first), each
  // a text or token ids.
  struct Prompt {
    std::string text;
    std::vector<int32_t> ids;
  };
  std::vector<Prompt> more_prompts;
};

// Parses and validates `f` (openai_fields.h decides which fields may be there). Whether the
// "pipeline" extension names a pipeline, and every default, is the executor's; the route sets a
// pipeline run's query (rag_query.h).
ApiError parse_openai_request(const Fields& f, bool chat, OaiRequest* out);

// Consumers of a run's events: SSE chunks ("data: {...}" ... "data: [DONE]"), or one JSON answer.
// With a gather (st->gather), each run is one choice: sources go out once, the answer (or
// [DONE]) once every run has ended, a failed run's error at once and alone.
RunConsumer openai_stream_consumer(std::shared_ptr<SseBridge> bridge, std::shared_ptr<OaiState> st);
RunConsumer openai_collect_consumer(std::shared_ptr<OaiState> st, Responder respond);

std::string base64(const uint8_t* p, size_t n);

// The whole (non-streaming) answer of `choices` (every run ended), in index order.
std::string completion_json(const std::vector<const OaiState*>& choices);

}  // namespace ragd::daemon
