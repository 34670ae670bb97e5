// Encoding of run results shared by the REST, SSE and WebSocket answers, and the SSE bridge.
#include "run_events.h"

namespace ragd::daemon {

using pipelines::RunEvent;

void write_sources(JsonWriter& w, const std::vector<pipelines::Source>& s) {
  w.begin_array();
  for (const auto& src : s) {
    w.begin_object();
    w.key("doc_id").value(src.doc_id).key("chunk_id").value(src.chunk_id);
    w.key("score").value(src.score).key("snippet").value(src.snippet);
    // Citation: where the passage is, to link and quote it.
    w.key("title").value(src.title).key("url");
    if (src.url.empty()) w.null();
    else w.value(src.url);
    w.key("section").begin_array();
    for (const auto& h : src.section) w.value(h);
    w.end_array().key("page");
    if (src.page == 0) w.null();
    else w.value(static_cast<uint64_t>(src.page));
    w.key("byte_begin").value(src.byte_begin).key("byte_end").value(src.byte_end);
    w.end_object();
  }
  w.end_array();
}

static void write_adapt(JsonWriter& w, const pipelines::AdaptReport& a) {
  w.key("adapt").begin_object();
  w.key("choice").value(a.choice).key("reason").value(a.reason).key("objective").value(a.objective);
  if (a.slo_ttft_ms > 0) w.key("slo_ttft_ms").value(a.slo_ttft_ms);
  if (a.ttft_quantile > 0) w.key("ttft_quantile").value(a.ttft_quantile);
  const pipelines::QuerySignals& q = a.signals;
  w.key("signals").begin_object().key("retrieved").value(q.retrieved);
  w.key("score_margin").value(q.score_margin).key("lexical_agreement").value(q.lexical_agreement);
  w.key("lexical_margin").value(q.lexical_margin).key("question_tokens").value(q.question_tokens);
  w.key("passage_tokens").value(q.passage_tokens).end_object();
  w.key("history").begin_object().key("runs").value(q.history.runs).key("reranked").value(q.history.reranked);
  w.key("rerank_agreement").value(q.history.rerank_agreement).key("ttft_exceed_rate").value(q.history.ttft_exceed_rate);
  w.key("ttft_scale").value(q.history.ttft_scale).end_object();
  w.key("load").begin_object().key("ahead").value(a.load.ahead).key("running").value(a.load.running);
  w.key("free_blocks").value(a.load.free_blocks).key("work_ahead_tokens").value(a.load.work_ahead_tokens).end_object();
  w.key("candidates").begin_array();
  for (const auto& [name, e] : a.estimates) {
    w.begin_object().key("name").value(name).key("quality").value(e.quality).key("ttft_ms").value(e.ttft_ms);
    w.key("ttft_q_ms").value(e.ttft_q_ms).key("work_tokens").value(e.work_tokens);
    w.key("fits_kv").value(e.fits_kv).key("fitted").value(e.fitted).end_object();
  }
  w.end_array().end_object();
}

void write_usage(JsonWriter& w, const pipelines::Usage& u) {
  w.begin_object();
  w.key("prompt_tokens").value(u.prompt_tokens).key("completion_tokens").value(u.completion_tokens);
  w.key("reused_tokens").begin_object();
  u.reused.for_each([&](std::string_view tier, int64_t n) { w.key(tier).value(n); });
  w.end_object();
  w.key("recomputed_tokens").value(u.recomputed_tokens);
  if (!u.reuse.empty()) w.key("reuse").value(u.reuse);
  w.key("approximate").value(u.approximate);
  if (u.approximate) {
    w.key("blended_tokens").value(u.blended_tokens).key("repaired_tokens").value(u.repaired_tokens);
    if (u.reuse == "cacheblend")
      w.key("recompute_ratio").value(u.recompute_ratio).key("recompute_ratio_floor").value(u.recompute_ratio_floor);
  }
  if (!u.reuse_note.empty()) w.key("reuse_note").value(u.reuse_note);
  if (u.speculative_prefill) w.key("speculative_prefill").value(true).key("prefill_restarts").value(u.prefill_restarts);
  if (u.sp_workers > 0) w.key("sp_workers").value(u.sp_workers).key("sp_decode_workers").value(u.sp_decode_workers);
  if (u.kv_spilled_tokens > 0) w.key("kv_spilled_tokens").value(u.kv_spilled_tokens);
  if (!u.semantic_cache.empty()) {
    w.key("semantic_cache").begin_object().key("result").value(u.semantic_cache);
    if (u.semantic_cache == "hit") w.key("similarity").value(u.semantic_similarity).key("question").value(u.semantic_question);
    w.end_object();
  }
  if (u.draft_steps > 0) {
    w.key("speculative_decoding").begin_object().key("drafted_tokens").value(u.drafted_tokens);
    w.key("accepted_tokens").value(u.accepted_tokens).key("steps").value(u.draft_steps);
    if (!u.draft_method.empty()) w.key("method").value(u.draft_method);
    w.end_object();
  }
  if (u.adapt) write_adapt(w, *u.adapt);
  if (!u.overlap.empty()) {
    w.key("iterative").begin_object();
    w.key("overlap").value(u.overlap).key("searches").value(u.searches).key("context_changes").value(u.context_changes);
    w.key("speculative_hits").value(u.speculative_hits).key("speculative_misses").value(u.speculative_misses);
    w.key("rollbacks").value(u.rollbacks).key("rolled_back_tokens").value(u.rolled_back_tokens);
    w.end_object();
  }
  w.end_object();
}

void write_timings(JsonWriter& w, const pipelines::Timings& t) {
  w.begin_object();
  w.key("queue_ms").value(t.queue_ms).key("retrieval_ms").value(t.retrieval_ms);
  w.key("kv_load_ms").value(t.kv_load_ms).key("prefill_ms").value(t.prefill_ms);
  w.key("lookup_ms").value(t.lookup_ms).key("admit_ms").value(t.admit_ms).key("publish_ms").value(t.publish_ms);
  w.key("ttft_ms").value(t.ttft_ms).key("tpot_ms").value(t.tpot_ms).key("total_ms").value(t.total_ms);
  w.key("search_wait_ms").value(t.search_wait_ms);
  w.key("retrieval_queue_ms").value(t.retrieval_queue_ms).key("rerank_ms").value(t.rerank_ms);
  if (t.blend_chunk_ms + t.blend_place_ms + t.blend_repair_ms > 0) {
    w.key("blend_chunk_ms").value(t.blend_chunk_ms).key("blend_place_ms").value(t.blend_place_ms);
    w.key("blend_repair_ms").value(t.blend_repair_ms);
  }
  w.end_object();
}

std::string event_json(const RunEvent& ev, const std::string& run_id) {
  JsonWriter w;
  w.begin_object();
  switch (ev.kind) {
    case RunEvent::Kind::kSources:
      w.key("event").value("sources").key("id").value(run_id).key("from_token").value(ev.from_token).key("sources");
      write_sources(w, ev.sources);
      break;
    case RunEvent::Kind::kToken:
      w.key("event").value("token").key("index").value(ev.index).key("text").value(ev.text);
      w.key("token_id").value(static_cast<int64_t>(ev.token_id)).key("logprob").value(ev.logprob);
      break;
    case RunEvent::Kind::kDone:
      w.key("event").value("done").key("id").value(run_id).key("finish_reason").value(ev.finish_reason);
      w.key("usage");
      write_usage(w, ev.usage);
      w.key("timings");
      write_timings(w, ev.timings);
      break;
    case RunEvent::Kind::kError: {
      ApiError e = from_status(ev.error, 1, run_id);
      w.key("event").value("error").key("id").value(run_id).key("error").begin_object();
      w.key("code").value(e.code).key("message").value(clip_input(e.message, kEchoMessageMaxBytes)).end_object();
      break;
    }
  }
  w.end_object();
  return w.take();
}

std::string error_event_json(const ApiError& e, const std::string& run_id) {
  JsonWriter w;
  w.begin_object().key("event").value("error");
  if (!run_id.empty()) w.key("id").value(run_id);
  // Bounded as error_response bounds a body: the message may quote the request.
  w.key("error").begin_object().key("code").value(e.code).key("message").value(clip_input(e.message, kEchoMessageMaxBytes));
  if (!e.param.empty()) w.key("param").value(clip_input(e.param));
  w.key("status").value(e.status).end_object().end_object();
  return w.take();
}

std::string sse_frame(const char* event, const std::string& data) {
  std::string out;
  if (event) {
    out += "event: ";
    out += event;
    out += "\n";
  }
  out += "data: ";
  out += data;
  out += "\n\n";
  return out;
}

const char* event_name(RunEvent::Kind k) {
  switch (k) {
    case RunEvent::Kind::kSources: return "sources";
    case RunEvent::Kind::kToken: return "token";
    case RunEvent::Kind::kDone: return "done";
    case RunEvent::Kind::kError: return "error";
  }
  return "?";
}

// SseBridge: events may arrive before the transport hands over the writer; buffer until then.
// Every hand-off to the writer happens under mu_, so frames keep the executor's order: a frame sent
// while attach() is flushing the pending ones cannot overtake them, and finish() cannot close the
// stream before they are written. StreamWriter::send / finish only queue (they never call back).
void SseBridge::attach(std::shared_ptr<StreamWriter> w) {
  std::lock_guard<std::mutex> l(mu_);
  writer_ = w;
  for (auto& m : pending_) w->send(std::move(m));
  pending_.clear();
  if (finished_) w->finish();
}

bool SseBridge::send(std::string msg) {
  std::lock_guard<std::mutex> l(mu_);
  if (!writer_) {
    pending_.push_back(std::move(msg));
    return !aborted_;
  }
  return writer_->send(std::move(msg));
}

void SseBridge::finish() {
  std::lock_guard<std::mutex> l(mu_);
  finished_ = true;
  if (writer_) writer_->finish();
}

void SseBridge::abort() {
  std::lock_guard<std::mutex> l(mu_);
  aborted_ = true;
}

}  // namespace ragd::daemon
