// Encoding of OpenAI-compatible responses: streaming chunks and whole answers.
#include "openai_encode.h"
#include "openai_fanout.h"

namespace ragd::daemon {

using pipelines::RunEvent;

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

namespace {

void write_oai_usage(JsonWriter& w, const pipelines::Usage& u) {
  w.begin_object().key("prompt_tokens").value(u.prompt_tokens).key("completion_tokens").value(u.completion_tokens);
  w.key("total_tokens").value(u.prompt_tokens + u.completion_tokens);
  w.key("prompt_tokens_details").begin_object().key("cached_tokens").value(u.reused_tokens()).end_object();
  w.end_object();
}

// OpenAI's usage of several choices: each prompt's tokens once (its first choice's), every
// choice's completion tokens, the first choices' reused tokens.
void write_oai_usage_of(JsonWriter& w, const std::vector<const OaiState*>& choices, int n) {
  if (choices.size() == 1) return write_oai_usage(w, choices[0]->usage);
  pipelines::Usage u;
  int cached = 0;
  for (size_t i = 0; i < choices.size(); ++i) {
    const pipelines::Usage& c = choices[i]->usage;
    if (i % static_cast<size_t>(n) == 0) u.prompt_tokens += c.prompt_tokens, cached += c.reused_tokens();
    u.completion_tokens += c.completion_tokens;
  }
  w.begin_object().key("prompt_tokens").value(u.prompt_tokens).key("completion_tokens").value(u.completion_tokens);
  w.key("total_tokens").value(u.prompt_tokens + u.completion_tokens);
  w.key("prompt_tokens_details").begin_object().key("cached_tokens").value(cached).end_object();
  w.end_object();
}

// ragd's usage and timings (the first choice's) and, for several choices, each one's usage.
void write_ragd_usage(JsonWriter& w, const std::vector<const OaiState*>& choices) {
  w.key("usage");
  write_usage(w, choices[0]->usage);
  w.key("timings");
  write_timings(w, choices[0]->timings);
  if (choices.size() > 1) {
    w.key("choices").begin_array();
    for (const OaiState* c : choices) {
      w.begin_object().key("index").value(c->index).key("usage");
      write_usage(w, c->usage);
      w.end_object();
    }
    w.end_array();
  }
}

void write_bytes(JsonWriter& w, const std::string& b) {
  w.key("bytes").begin_array();
  for (unsigned char c : b) w.value(static_cast<int>(c));
  w.end_array();
}

// Chat: {"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}...]}; an
// alternative's token is its bytes as text (U+FFFD for part of a character; "bytes" has them all).
void write_token_logprob(JsonWriter& w, const OaiToken& t) {
  w.begin_object().key("token").value(t.text).key("logprob").value(t.logprob);
  write_bytes(w, t.text);
  w.key("top_logprobs").begin_array();
  for (const auto& a : t.top) {
    w.begin_object().key("token").value(a.bytes).key("logprob").value(a.logprob);
    write_bytes(w, a.bytes);
    w.end_object();
  }
  w.end_array().end_object();
}

// Completions: "top_logprobs" maps each step's likeliest tokens to their logprobs (the sampled
// token alone when no alternatives were asked for).
void write_completion_logprobs(JsonWriter& w, const std::vector<OaiToken>& toks) {
  w.begin_object().key("tokens").begin_array();
  for (const auto& t : toks) w.value(t.text);
  w.end_array().key("token_logprobs").begin_array();
  for (const auto& t : toks) w.value(t.logprob);
  w.end_array().key("top_logprobs").begin_array();
  for (const auto& t : toks) {
    w.begin_object();
    if (t.top.empty()) w.key(t.text).value(t.logprob);
    for (const auto& a : t.top) w.key(a.bytes).value(a.logprob);
    w.end_object();
  }
  w.end_array().key("text_offset").begin_array();
  size_t off = 0;
  for (const auto& t : toks) {
    w.value(static_cast<uint64_t>(off));
    off += t.text.size();
  }
  w.end_array().end_object();
}

// One streaming chunk. `delta_text` null = no content; `finish` "" = null.
std::string chunk_json(const OaiState& s, const std::string* delta_text, bool role, const std::string& finish,
                       const OaiToken* lp) {
  JsonWriter w;
  w.begin_object().key("id").value(s.id).key("object").value(s.chat ? "chat.completion.chunk" : "text_completion");
  w.key("created").value(s.created).key("model").value(s.model).key("choices").begin_array().begin_object();
  w.key("index").value(s.index);
  if (s.chat) {
    w.key("delta").begin_object();
    if (role) w.key("role").value("assistant");
    if (delta_text) w.key("content").value(*delta_text);
    w.end_object();
    if (lp) {
      w.key("logprobs").begin_object().key("content").begin_array();
      write_token_logprob(w, *lp);
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

// The chunk that carries a streamed answer's citations, after its last content (indices into the
// whole answer), as OpenAI streams annotations in a delta.
std::string annotations_chunk_json(const OaiState& s) {
  JsonWriter w;
  w.begin_object().key("id").value(s.id).key("object").value("chat.completion.chunk");
  w.key("created").value(s.created).key("model").value(s.model).key("choices").begin_array().begin_object();
  w.key("index").value(s.index).key("delta").begin_object().key("annotations");
  write_url_citations(w, s.answer, s.contexts);
  w.end_object().key("logprobs").null().key("finish_reason").null();
  w.end_object().end_array().end_object();
  return w.take();
}

// A chunk whose delta carries tool calls (openai_tools.h).
std::string tool_chunk_json(const OaiState& s, const std::vector<engine::ToolCallStream::Delta::Call>& calls) {
  JsonWriter w;
  w.begin_object().key("id").value(s.id).key("object").value("chat.completion.chunk");
  w.key("created").value(s.created).key("model").value(s.model).key("choices").begin_array().begin_object();
  w.key("index").value(s.index).key("delta").begin_object().key("tool_calls");
  write_tool_call_deltas(w, calls, s.tools->id_prefix);
  w.end_object().key("logprobs").null().key("finish_reason").null();
  w.end_object().end_array().end_object();
  return w.take();
}

// A streamed piece of an answer with tools: its content (when any, or with logprobs) and its calls.
std::string tool_delta_frames(const OaiState& s, const engine::ToolCallStream::Delta& d, const OaiToken* lp) {
  std::string out;
  if (!d.content.empty() || lp) out += sse_frame(nullptr, chunk_json(s, &d.content, false, "", lp));
  if (!d.calls.empty()) out += sse_frame(nullptr, tool_chunk_json(s, d.calls));
  return out;
}

}  // namespace

RunConsumer openai_stream_consumer(std::shared_ptr<SseBridge> bridge, std::shared_ptr<OaiState> st) {
  return [bridge, st](const RunEvent& ev) {
      std::string out;
      switch (ev.kind) {
        case RunEvent::Kind::kSources: {
          if (st->annotate) st->contexts.push_back({st->answer.size(), ev.sources});
          if (st->footer) st->footer_sources = ev.sources;
          if (st->gather && !st->gather->first_sources()) break;  // the choices share their sources
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
          if (st->annotate) st->answer += ev.text;
          const OaiToken lp{ev.text, ev.logprob, ev.top_logprobs};
          if (st->tools) {
            out += tool_delta_frames(*st, st->tools->stream->feed(ev.text), st->want_logprobs ? &lp : nullptr);
            break;
          }
          if (!ev.text.empty() || st->want_logprobs)
            out += sse_frame(nullptr, chunk_json(*st, &ev.text, false, "", st->want_logprobs ? &lp : nullptr));
          break;
        }
        case RunEvent::Kind::kDone: {
          if (st->chat && !st->sent_role) {
            static const std::string kEmpty;
            out += sse_frame(nullptr, chunk_json(*st, &kEmpty, true, "", nullptr));
          }
          if (st->footer) {
            const std::string footer = sources_footer(st->footer_sources, st->numbered);
            if (!footer.empty()) out += sse_frame(nullptr, chunk_json(*st, &footer, false, "", nullptr));
          }
          if (st->chat && st->annotate && !find_citations(st->answer, st->contexts).empty())
            out += sse_frame(nullptr, annotations_chunk_json(*st));
          std::string finish = ev.finish_reason.empty() ? "stop" : ev.finish_reason;
          if (st->tools) {
            out += tool_delta_frames(*st, st->tools->stream->finish(), nullptr);
            finish = tool_finish_reason(*st->tools, st->tools->stream->num_calls(), finish);
          }
          out += sse_frame(nullptr, chunk_json(*st, nullptr, false, finish, nullptr));
          {
            std::lock_guard<std::mutex> l(st->mu);
            st->finish = finish;
            st->usage = ev.usage;
            st->timings = ev.timings;
          }
          if (st->gather) {  // this choice's end goes out before the request's end can
            const bool sent = bridge->send(std::move(out));
            out.clear();
            if (!st->gather->run_ended()) return sent;  // others still run
          }
          const std::vector<const OaiState*> all = st->gather ? st->gather->all() : std::vector<const OaiState*>{st.get()};
          if (st->include_usage) {
            JsonWriter w;
            w.begin_object().key("id").value(st->id).key("object").value(st->chat ? "chat.completion.chunk" : "text_completion");
            w.key("created").value(st->created).key("model").value(st->model).key("choices").begin_array().end_array();
            w.key("usage");
            write_oai_usage_of(w, all, st->gather ? st->gather->n : 1);
            w.key("ragd").begin_object();
            write_ragd_usage(w, all);
            w.end_object().end_object();
            out += sse_frame(nullptr, w.str());
          }
          out += "data: [DONE]\n\n";
          break;
        }
        case RunEvent::Kind::kError: {
          if (st->gather && !st->gather->fail()) return false;  // the request already ended
          ApiError err = from_status(ev.error, 1);
          HttpResponse r = to_response(err);
          out = sse_frame(nullptr, r.body) + "data: [DONE]\n\n";
          break;
        }
      }
      bool ok = out.empty() ? true : bridge->send(std::move(out));
      if (ev.kind == RunEvent::Kind::kDone || ev.kind == RunEvent::Kind::kError) bridge->finish();
      return ok;
    };
}

std::string completion_json(const std::vector<const OaiState*>& choices) {
  const OaiState& s0 = *choices.front();
  const int n = s0.gather ? s0.gather->n : 1;
  JsonWriter w;
  w.begin_object().key("id").value(s0.id).key("object").value(s0.chat ? "chat.completion" : "text_completion");
  w.key("created").value(s0.created).key("model").value(s0.model).key("choices").begin_array();
  for (const OaiState* c : choices) {
    w.begin_object().key("index").value(c->index);
    std::string finish = c->finish;
    if (c->chat) {
      w.key("message").begin_object().key("role").value("assistant");
      if (c->tools) {
        // An answer with tools: its calls, and the text before them (null when none).
        engine::ToolOutput o = engine::parse_tool_calls(c->tools->format, c->output);
        w.key("content");
        if (!o.calls.empty() && o.content.empty()) w.null();
        else w.value(o.content);
        if (!o.calls.empty()) {
          w.key("tool_calls");
          write_tool_calls(w, o.calls, c->tools->id_prefix);
        }
        finish = tool_finish_reason(*c->tools, o.calls.size(), finish);
      } else {
        w.key("content").value(c->footer ? c->output + sources_footer(c->sources, c->numbered) : c->output);
        if (c->annotate) {
          w.key("annotations");
          write_url_citations(w, c->output, c->contexts);
        }
      }
      w.end_object();
      if (c->want_logprobs) {
        w.key("logprobs").begin_object().key("content").begin_array();
        for (const auto& t : c->tokens) write_token_logprob(w, t);
        w.end_array().end_object();
      } else {
        w.key("logprobs").null();
      }
    } else {
      w.key("text").value(c->footer ? c->output + sources_footer(c->sources, c->numbered) : c->output);
      if (c->want_logprobs) {
        w.key("logprobs");
        write_completion_logprobs(w, c->tokens);
      } else {
        w.key("logprobs").null();
      }
    }
    w.key("finish_reason").value(finish);
    w.end_object();
  }
  w.end_array();
  w.key("usage");
  write_oai_usage_of(w, choices, n);
  w.key("ragd").begin_object().key("sources");
  write_sources(w, s0.sources);
  write_ragd_usage(w, choices);
  w.end_object().end_object();
  return w.take();
}

RunConsumer openai_collect_consumer(std::shared_ptr<OaiState> st, Responder respond) {
  return [st, respond](const RunEvent& ev) {
    std::lock_guard<std::mutex> l(st->mu);
    switch (ev.kind) {
      case RunEvent::Kind::kSources:
        st->sources = ev.sources;
        if (st->annotate) st->contexts.push_back({st->output.size(), ev.sources});
        break;
      case RunEvent::Kind::kToken:
        st->output += ev.text;
        if (st->want_logprobs) st->tokens.push_back({ev.text, ev.logprob, ev.top_logprobs});
        break;
      case RunEvent::Kind::kError:
        if (!st->gather || st->gather->fail()) respond(to_response(from_status(ev.error, 1)));
        break;
      case RunEvent::Kind::kDone: {
        st->finish = ev.finish_reason.empty() ? "stop" : ev.finish_reason;
        st->usage = ev.usage;
        st->timings = ev.timings;
        if (st->gather && !st->gather->run_ended()) break;  // the last run to end answers
        HttpResponse r;
        r.body = completion_json(st->gather ? st->gather->all() : std::vector<const OaiState*>{st.get()});
        respond(std::move(r));
        break;
      }
    }
    return true;
  };
}

}  // namespace ragd::daemon
