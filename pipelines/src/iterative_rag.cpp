#include "iterative_rag.h"

#include <algorithm>

#include "ragd/common/utf8.h"

namespace ragd::pipelines {

namespace {

double ms_since(IterativeRag::Clock::time_point a, IterativeRag::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// Drops bytes that do not form valid UTF-8 sequences (a token window may cut a character).
std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_sequence_length(s, i);
    if (n > 0) out.append(s, i, n);
    i += n > 0 ? n : 1;
  }
  return out;
}

std::vector<ContextDoc> top_docs(const SearchOutcome& o, int k) {
  std::vector<ContextDoc> v(o.hits.begin(), o.hits.begin() + std::min<size_t>(o.hits.size(), std::max(k, 0)));
  sort_prompt_order(v);
  return v;
}

}  // namespace

IterativeRag::IterativeRag(uint64_t sid, const IterativeParams& params, int k, int nprobe, std::string question,
                           std::shared_ptr<const engine::Tokenizer> tok)
    : sid_(sid), tok_(std::move(tok)) {
  it_.params = params;
  it_.k = k;
  it_.nprobe = nprobe;
  it_.question = std::move(question);
}

// Every mode fetches the same number of hits: FAISS may break ties differently for another k, and
// the modes must see the same search results.
int IterativeRag::fetch() const { return std::max(it_.k, it_.params.speculation_cache); }

bool IterativeRag::wants_vectors() const { return is_speculative(it_.params.overlap); }

void IterativeRag::on_first_search(const SearchOutcome& o) {
  it_.searches = 1;
  for (size_t i = 0; i < o.hits.size() && i < o.vectors.size(); ++i)
    it_.cache.add(o.hits[i], o.vectors[i], i < o.lists.size() ? o.lists[i] : -1);
}

void IterativeRag::set_context(std::vector<ContextDoc> docs) { it_.context = std::move(docs); }

std::string IterativeRag::query(const RunState& s, int boundary) const {
  const int upto = std::max(0, boundary - it_.params.query_lag * it_.params.retrieval_interval);
  const int from = std::max(0, upto - it_.params.query_window);
  std::string q = it_.question;
  if (upto > from) {
    const std::string tail = valid_utf8(tok_->decode(s.generated_tokens().subspan(from, upto - from), true));
    if (!tail.empty()) q += " " + tail;
  }
  return q;
}

uint64_t IterativeRag::issue(std::vector<std::string> queries, int nprobe, RunLoop& loop) {
  const uint64_t ticket = it_.next_ticket++;
  it_.searches += static_cast<int>(queries.size());
  if (!loop.issue_search(sid_, ticket, it_.epoch, std::move(queries), fetch(), nprobe, wants_vectors())) {
    failure_ = Status::ResourceExhausted("iterative retrieval: the retrieval queue is full or stopping");
    return 0;
  }
  return ticket;
}

void IterativeRag::start(RunState& s, RunLoop& loop) {
  it_.next_boundary = it_.params.retrieval_interval;
  it_.last_boundary = Clock::now();
  if (is_speculative(it_.params.overlap)) s.set_auto_commit(false);
  if (it_.params.overlap == RetrievalOverlap::kPipeRag) issue_ahead(s, 0, loop);
}

void IterativeRag::issue_ahead(RunState& s, int boundary, RunLoop& loop) {
  const int next = boundary + it_.params.retrieval_interval;
  if (next >= s.max_new_tokens()) return;
  // PipeRAG's performance model: the search must fit in one interval of this run's decoding.
  const int max_nprobe = it_.params.max_nprobe > 0 ? it_.params.max_nprobe : it_.nprobe;
  const int nprobe = it_.ms_per_token > 0
                         ? loop.choose_nprobe(0.9 * it_.ms_per_token * it_.params.retrieval_interval, max_nprobe)
                         : max_nprobe;
  const uint64_t t = issue({query(s, boundary)}, nprobe, loop);
  if (t) it_.ahead = IterState::Ahead{t, next, std::nullopt};
}

void IterativeRag::take_ahead(RunState& s, RunLoop& loop) {
  SearchOutcome o = std::move(*it_.ahead->result);
  const int b = it_.ahead->boundary;
  it_.ahead.reset();
  it_.waiting_boundary = -1;
  if (!o.status.ok()) {
    failure_ = Status::Unavailable("iterative retrieval failed: " + o.status.to_string());
    return;
  }
  std::vector<ContextDoc> docs = top_docs(o, it_.k);
  if (chunk_ids(docs) != chunk_ids(it_.context)) {
    change_context(std::move(docs), loop);
    announce_context(s, b);
  }
  if (it_.params.overlap == RetrievalOverlap::kPipeRag) issue_ahead(s, b, loop);
  set_hold(false, loop);
}

void IterativeRag::change_context(std::vector<ContextDoc> docs, RunLoop& loop) {
  if (Status st = loop.rebuild_prompt(sid_, docs); !st.ok()) {
    failure_ = st;
    return;
  }
  it_.context = std::move(docs);
}

void IterativeRag::announce_context(RunState& s, int from_token) {
  RunEvent ev;
  ev.kind = RunEvent::Kind::kSources;
  ev.from_token = from_token;
  for (const auto& d : it_.context) ev.sources.push_back(d.source);
  std::stable_sort(ev.sources.begin(), ev.sources.end(), [](const Source& a, const Source& b) { return a.score > b.score; });
  s.push_event(std::move(ev));
  ++it_.context_changes;
}

void IterativeRag::set_hold(bool on, RunLoop& loop) {
  if (it_.held == on) return;
  it_.held = on;
  loop.hold(sid_, on);
  const auto now = Clock::now();
  if (on) {
    it_.wait_since = now;
  } else {
    it_.wait_ms += ms_since(it_.wait_since, now);
    it_.last_token = {};  // the wait is not decode time (piperag's budget)
  }
}

bool IterativeRag::release_settled(RunState& s, RunLoop& loop) {
  if (is_speculative(it_.params.overlap)) {
    if (it_.pending.empty()) s.commit();
    else s.commit_to(it_.pending.front().cp->events);
  }
  return loop.release_events(sid_);
}

std::string IterativeRag::after_token(RunState& s, std::string reason, RunLoop& loop) {
  const auto now = Clock::now();
  if (it_.last_token != Clock::time_point{}) {
    const double dt = ms_since(it_.last_token, now);
    it_.ms_per_token = it_.ms_per_token == 0 ? dt : 0.8 * it_.ms_per_token + 0.2 * dt;
  }
  it_.last_token = now;
  if (reason == "cancelled") return reason;
  const bool spec = is_speculative(it_.params.overlap);
  if (!reason.empty()) {
    if (!spec || it_.pending.empty()) return release_settled(s, loop) ? reason : "cancelled";
    // The run ended under a context not verified yet: verify before it finishes.
    if (it_.params.overlap == RetrievalOverlap::kSpeculative) verify_pending(loop);
    set_hold(true, loop);
    return "";
  }
  const int g = s.generated();
  if (g >= it_.next_boundary) {
    it_.next_boundary = g + it_.params.retrieval_interval;
    switch (it_.params.overlap) {
      case RetrievalOverlap::kNone: {
        const uint64_t t = issue({query(s, g)}, it_.nprobe, loop);
        if (t) {
          it_.ahead = IterState::Ahead{t, g, std::nullopt};
          it_.waiting_boundary = g;
          set_hold(true, loop);
        }
        break;
      }
      case RetrievalOverlap::kPipeRag:
        if (!it_.ahead || it_.ahead->boundary != g) {  // nothing ran ahead (refused): search now
          const uint64_t t = issue({query(s, g)}, it_.nprobe, loop);
          if (!t) break;
          it_.ahead = IterState::Ahead{t, g, std::nullopt};
        }
        it_.waiting_boundary = g;
        if (it_.ahead->result) take_ahead(s, loop);
        else set_hold(true, loop);
        break;
      case RetrievalOverlap::kSpeculative:
      case RetrievalOverlap::kBoth: speculate(s, g, loop); break;
    }
  }
  if (!spec) return "";
  return release_settled(s, loop) ? std::string() : std::string("cancelled");
}

void IterativeRag::speculate(RunState& s, int boundary, RunLoop& loop) {
  const auto now = Clock::now();
  it_.stride.observe_step_ms(ms_since(it_.last_boundary, now));
  it_.last_boundary = now;
  IterState::Pending p;
  p.boundary = boundary;
  p.query = query(s, boundary);
  std::vector<ContextDoc> spec = it_.context;  // no embedding: speculate that nothing changes
  std::vector<float> qv;
  std::vector<int64_t> lists;
  if (loop.embed_query(p.query, it_.nprobe, &qv, &lists)) {
    spec = it_.cache.top_k(qv, it_.k, lists);
    sort_prompt_order(spec);
  }
  p.spec_ids = chunk_ids(spec);
  p.prev_ids = chunk_ids(it_.context);
  p.cp.emplace(s.checkpoint());
  p.forced_miss = loop.force_misspeculation(sid_, boundary);
  const bool both = it_.params.overlap == RetrievalOverlap::kBoth;
  const int stride = it_.stride.stride(it_.params.max_stride);
  // Decoding on under the speculation pays only when it is right often enough: speculative needs
  // an OS3 stride above 1 (or a batch already open); both needs half of the recent verdicts right.
  // Otherwise the run waits for this boundary's search, as the sequential run does, and the
  // verdict still feeds the accuracy window.
  p.applied = p.forced_miss || (both ? it_.stride.hit_rate() >= 0.5 : stride > 1 || !it_.pending.empty());
  if (p.applied && p.spec_ids != p.prev_ids) {
    change_context(std::move(spec), loop);
    announce_context(s, boundary);
  }
  it_.pending.push_back(std::move(p));
  const bool applied = it_.pending.back().applied;
  if (both) {
    it_.pending.back().ticket = issue({it_.pending.back().query}, it_.nprobe, loop);
    if (!applied || static_cast<int>(it_.pending.size()) > it_.params.max_stride) set_hold(true, loop);
  } else if (!applied || static_cast<int>(it_.pending.size()) >= stride) {
    verify_pending(loop);
  }
}

void IterativeRag::verify_pending(RunLoop& loop) {
  std::vector<std::string> queries;
  for (const auto& p : it_.pending)
    if (!p.ticket) queries.push_back(p.query);
  if (!queries.empty()) {
    const uint64_t t = issue(std::move(queries), it_.nprobe, loop);
    if (!t) return;
    for (auto& p : it_.pending)
      if (!p.ticket) p.ticket = t;
    it_.verifying = true;
    it_.verify_since = Clock::now();
  }
  set_hold(true, loop);
}

void IterativeRag::rollback(RunState& s, const IterState::Pending& p, std::vector<ContextDoc> real, RunLoop& loop) {
  it_.rolled_back += s.generated() - p.boundary;
  const std::vector<uint64_t> prev = p.prev_ids;
  const int boundary = p.boundary;
  s.restore(*p.cp);     // generated tokens and events after the boundary go (p's context event too)
  it_.pending.clear();  // p is gone from here on
  ++it_.epoch;          // searches in flight were for the discarded tokens
  it_.verifying = false;
  it_.next_boundary = boundary + it_.params.retrieval_interval;
  it_.last_boundary = Clock::now();
  const std::vector<uint64_t> ids = chunk_ids(real);
  if (ids != chunk_ids(it_.context)) {
    change_context(std::move(real), loop);
  } else if (Status st = loop.restart_kv(sid_); !st.ok()) {
    failure_ = st;
  }
  if (ids != prev) announce_context(s, boundary);
}

void IterativeRag::settle(RunState& s, RunLoop& loop) {
  while (!it_.pending.empty() && it_.pending.front().result) {
    IterState::Pending& p = it_.pending.front();
    const SearchOutcome& o = *p.result;
    if (!o.status.ok()) {
      failure_ = Status::Unavailable("iterative retrieval failed: " + o.status.to_string());
      return;
    }
    for (size_t i = 0; i < o.hits.size() && i < o.vectors.size(); ++i)
      it_.cache.add(o.hits[i], o.vectors[i], i < o.lists.size() ? o.lists[i] : -1);
    std::vector<ContextDoc> real = top_docs(o, it_.k);
    const bool right = chunk_ids(real) == p.spec_ids;
    it_.stride.observe(right);
    ++(right && !p.forced_miss ? it_.hits : it_.misses);
    if (!p.applied) {  // the run waited here: the real context goes in as in the sequential run
      const int boundary = p.boundary;
      it_.pending.pop_front();
      if (chunk_ids(real) != chunk_ids(it_.context)) {
        change_context(std::move(real), loop);
        announce_context(s, boundary);
      }
      continue;
    }
    if (right && !p.forced_miss) {
      it_.pending.pop_front();
      continue;
    }
    ++it_.rollbacks;
    rollback(s, p, std::move(real), loop);
    break;
  }
  const bool ended = !s.finish_reason().empty();
  bool hold = it_.verifying || (ended && !it_.pending.empty());
  if (it_.params.overlap == RetrievalOverlap::kBoth)
    hold = hold || static_cast<int>(it_.pending.size()) > it_.params.max_stride ||
           (!it_.pending.empty() && !it_.pending.back().applied);
  set_hold(hold, loop);
}

void IterativeRag::on_search_done(SearchDone d, RunState& s, RunLoop& loop) {
  if (d.epoch != it_.epoch) return;  // issued before a rollback
  if (it_.ahead && it_.ahead->ticket == d.ticket) {
    it_.ahead->result = std::move(d.results.at(0));
    if (it_.waiting_boundary == it_.ahead->boundary) take_ahead(s, loop);
  } else {
    size_t j = 0;
    for (auto& p : it_.pending)
      if (p.ticket == d.ticket && j < d.results.size()) p.result = std::move(d.results[j++]);
    if (it_.verifying && j > 0 && it_.params.overlap == RetrievalOverlap::kSpeculative) {
      it_.stride.observe_verify_ms(ms_since(it_.verify_since, Clock::now()));
      it_.verifying = false;
    }
    settle(s, loop);
  }
  // Each of these ends the run and destroys this unit: nothing after them.
  if (failure_) return loop.fail(sid_, *failure_);
  if (!release_settled(s, loop)) return loop.finish(sid_, "cancelled");
  if (!it_.held && it_.pending.empty() && !s.finish_reason().empty()) loop.finish(sid_, s.finish_reason());
}

void IterativeRag::on_finish(RunLoop& loop, Usage& usage, Timings& timings) {
  if (it_.held) set_hold(false, loop);
  usage.overlap = std::string(overlap_name(it_.params.overlap));
  usage.searches = it_.searches;
  usage.context_changes = it_.context_changes;
  usage.speculative_hits = it_.hits;
  usage.speculative_misses = it_.misses;
  usage.rollbacks = it_.rollbacks;
  usage.rolled_back_tokens = it_.rolled_back;
  timings.search_wait_ms = timings.retrieval_ms + it_.wait_ms;
}

}  // namespace ragd::pipelines
