// Iterative RAG on the executor (iterative.h): retrieval at every retrieval_interval generated
// tokens, the context change that follows (prompt rebuilt, KV kept up to the first changed token),
// and the three ways of overlapping search with decoding.
//
// Boundaries. A boundary b is reached when the run has generated b tokens (b a multiple of the
// interval, b < max_tokens); the context chosen there applies to the tokens from index b on. The
// b-th token is sampled after the new context's prefill. With every mode, the context at b is the
// top-k of a real search for the query at b (question + last query_window tokens before b, or
// before b - query_lag intervals) - except piperag, whose query is one interval older.
//
// Speculation. A speculated boundary takes a checkpoint of the run (RunState) before it changes
// the context; its tokens and events stay uncommitted (never sent) until the real search for it
// agrees. At the first boundary that disagrees, the run goes back to that checkpoint, the KV is
// cut to the tokens both contexts share, the real context goes in, and decoding resumes: exactly
// what the sequential run did at that boundary.
#include <algorithm>
#include <thread>

#include "executor_impl.h"
#include "ragd/common/log.h"
#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#endif

namespace ragd::pipelines {

namespace {


// Drops bytes that do not form complete UTF-8 sequences (a token window may cut a character).
std::string valid_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size();
    for (size_t j = 1; ok && j < n; ++j) ok = (static_cast<unsigned char>(s[i + j]) & 0xC0) == 0x80;
    if (ok) out.append(s, i, n);
    i += ok ? n : 1;
  }
  return out;
}

std::vector<ContextDoc> top_docs(const SearchOutcome& o, int k) {
  std::vector<ContextDoc> v(o.hits.begin(), o.hits.begin() + std::min<size_t>(o.hits.size(), std::max(k, 0)));
  sort_prompt_order(v);
  return v;
}

}  // namespace

#if RAGD_HAVE_RETRIEVAL
ContextDoc ExecutorImpl::context_doc(retrieval::Hit& h) const {
  ContextDoc d;
  d.chunk_id = h.chunk.id;
  d.tokens = h.chunk.token_ids.empty() ? tok_->encode(h.chunk.text, false, false) : std::move(h.chunk.token_ids);
  d.source = Source{h.chunk.doc_id, h.chunk.id, h.score, h.chunk.text.substr(0, 240)};
  return d;
}
#endif

PromptSegments ExecutorImpl::rag_prompt(const Run& r, const std::vector<ContextDoc>& docs) const {
  std::vector<std::vector<int32_t>> toks;
  toks.reserve(docs.size());
  for (const auto& d : docs) toks.push_back(d.tokens);
  return prompts_->build_rag(*r.res.spec, toks, r.rr.query);
}

void ExecutorImpl::rank_hits(std::vector<retrieval::Hit>& hits, size_t from) {
  // Equal scores in a fixed order (smaller chunk id first), as the speculation cache ranks them.
  std::stable_sort(hits.begin() + static_cast<std::ptrdiff_t>(std::min(hits.size(), from)), hits.end(),
                   [](const retrieval::Hit& a, const retrieval::Hit& b) {
                     return a.score != b.score ? a.score > b.score : a.chunk.id < b.chunk.id;
                   });
}

std::vector<SearchOutcome> ExecutorImpl::search_passages(std::span<const std::string> queries, const std::string& tenant,
                                                         int k, int fetch, int nprobe, const std::string& must_include,
                                                         bool vectors) {
  std::vector<SearchOutcome> out(queries.size());
  for (auto& o : out) o.nprobe = nprobe;
  auto fail_all = [&](const Status& st) {
    for (auto& o : out) o.status = st;
    return out;
  };
  const auto t0 = Clock::now();
#if RAGD_HAVE_RETRIEVAL
  if (!corpus_) return fail_all(Status::FailedPrecondition("the runtime has no corpus (data_dir)"));
  // One round trip to the (modelled) remote vector database for the whole batch.
  if (opts_.test_hooks.search_delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(opts_.test_hooks.search_delay_ms));
  retrieval::SearchParams sp;
  sp.nprobe = nprobe;
  // The request's tenant sees its own documents and the shared ones, filtered inside the search.
  auto batch = corpus_->search_batch(queries, std::max(k, fetch), retrieval::ReadScope::tenant(tenant), sp);
  if (!batch.ok()) return fail_all(batch.status());
  const double ms = ms_between(t0, Clock::now());
  for (size_t qi = 0; qi < queries.size(); ++qi) {
    SearchOutcome& o = out[qi];
    std::vector<retrieval::Hit>& hits = (*batch)[qi];
    if (!must_include.empty()) {
      std::vector<retrieval::Hit> top(hits.begin(), hits.begin() + std::min<size_t>(hits.size(), k));
      if (Status st = include_document(must_include, tenant, k, &top); !st.ok()) return fail_all(st);
      for (auto& h : hits)
        if (std::none_of(top.begin(), top.end(), [&](const retrieval::Hit& t) { return t.chunk.id == h.chunk.id; }))
          top.push_back(std::move(h));
      hits = std::move(top);
    }
    rank_hits(hits, must_include.empty() ? 0 : static_cast<size_t>(k));
    for (auto& h : hits) o.hits.push_back(context_doc(h));
    if (vectors) {
      for (auto& h : hits) o.vectors.push_back(std::move(h.vector));
      std::vector<float> flat;
      for (const auto& x : o.vectors) flat.insert(flat.end(), x.begin(), x.end());
      auto lists = corpus_->coarse_lists(flat, 1);
      if (!lists.ok()) return fail_all(lists.status());
      for (const auto& l : *lists) o.lists.push_back(l.empty() ? -1 : l[0]);
    }
    o.ms = ms;
  }
  search_time_.observe(nprobe, ms);
  return out;
#else
  (void)tenant, (void)k, (void)fetch, (void)must_include, (void)vectors, (void)t0;
  return fail_all(Status::FailedPrecondition("this build has no retrieval module"));
#endif
}

std::string ExecutorImpl::iter_query(const Run& r, int boundary) const {
  const IterState& it = *r.iter;
  const int upto = std::max(0, boundary - it.params.query_lag * it.params.retrieval_interval);
  const int from = std::max(0, upto - it.params.query_window);
  std::string q = it.question;
  if (upto > from) {
    const std::string tail = valid_utf8(tok_->decode(r.state->generated_tokens().subspan(from, upto - from), true));
    if (!tail.empty()) q += " " + tail;
  }
  return q;
}

uint64_t ExecutorImpl::issue_search(Run& r, std::vector<std::string> queries, int nprobe) {
  IterState& it = *r.iter;
  const uint64_t ticket = it.next_ticket++;
  const bool vectors = is_speculative(it.params.overlap);
  // Every mode fetches the same number of hits: FAISS may break ties differently for another k,
  // and the modes must see the same search results.
  const int fetch = std::max(it.k, it.params.speculation_cache);
  it.searches += static_cast<int>(queries.size());
  auto task = [this, sid = r.sid, ticket, epoch = it.epoch, queries = std::move(queries), tenant = r.rr.tenant,
               must = r.rr.context_must_include, k = it.k, fetch, nprobe, vectors] {
    SearchDone d{sid, ticket, epoch, search_passages(queries, tenant, k, fetch, nprobe, must, vectors)};
    std::lock_guard<std::mutex> lk(mu_);
    searches_done_.push_back(std::move(d));
    cv_.notify_all();
  };
  if (!retrieval_pool_->submit(r.rr.tenant, std::move(task))) {
    r.iter_failure = Status::ResourceExhausted("iterative retrieval: the retrieval queue is full or stopping");
    return 0;
  }
  return ticket;
}

void ExecutorImpl::iter_start(Run& r) {
  IterState& it = *r.iter;
  it.next_boundary = it.params.retrieval_interval;
  it.last_boundary = Clock::now();
  if (is_speculative(it.params.overlap)) r.state->set_auto_commit(false);
  if (it.params.overlap == RetrievalOverlap::kPipeRag) issue_ahead(r, 0);
}

void ExecutorImpl::issue_ahead(Run& r, int boundary) {
  IterState& it = *r.iter;
  const int next = boundary + it.params.retrieval_interval;
  if (next >= r.state->max_new_tokens()) return;
  // PipeRAG's performance model: the search must fit in one interval of this run's decoding.
  const int max_nprobe = it.params.max_nprobe > 0 ? it.params.max_nprobe : it.nprobe;
  const int nprobe = it.ms_per_token > 0
                         ? search_time_.choose(0.9 * it.ms_per_token * it.params.retrieval_interval, max_nprobe)
                         : max_nprobe;
  const uint64_t t = issue_search(r, {iter_query(r, boundary)}, nprobe);
  if (t) it.ahead = IterState::Ahead{t, next, std::nullopt};
}

void ExecutorImpl::take_ahead(Run& r) {
  IterState& it = *r.iter;
  SearchOutcome o = std::move(*it.ahead->result);
  const int b = it.ahead->boundary;
  it.ahead.reset();
  it.waiting_boundary = -1;
  if (!o.status.ok()) {
    r.iter_failure = Status::Unavailable("iterative retrieval failed: " + o.status.to_string());
    return;
  }
  std::vector<ContextDoc> docs = top_docs(o, it.k);
  if (chunk_ids(docs) != chunk_ids(it.context)) {
    change_context(r, std::move(docs));
    announce_context(r, b);
  }
  if (it.params.overlap == RetrievalOverlap::kPipeRag) issue_ahead(r, b);
  set_hold(r, false);
}

void ExecutorImpl::change_context(Run& r, std::vector<ContextDoc> docs) {
  if (Status st = rebuild_prompt(r, docs); !st.ok()) {
    r.iter_failure = st;
    return;
  }
  r.iter->context = std::move(docs);
}

void ExecutorImpl::announce_context(Run& r, int from_token) {
  IterState& it = *r.iter;
  RunEvent ev;
  ev.kind = RunEvent::Kind::kSources;
  ev.from_token = from_token;
  for (const auto& d : it.context) ev.sources.push_back(d.source);
  std::stable_sort(ev.sources.begin(), ev.sources.end(), [](const Source& a, const Source& b) { return a.score > b.score; });
  r.state->push_event(std::move(ev));
  ++it.context_changes;
}

void ExecutorImpl::set_hold(Run& r, bool on) {
  IterState& it = *r.iter;
  if (it.held == on) return;
  it.held = on;
  sched_->hold(r.sid, on);
  const auto now = Clock::now();
  if (on) {
    it.wait_since = now;
  } else {
    it.wait_ms += ms_between(it.wait_since, now);
    it.last_token = {};  // the wait is not decode time (piperag's budget)
  }
}

bool ExecutorImpl::release_settled(Run& r) {
  IterState& it = *r.iter;
  RunState& s = *r.state;
  if (is_speculative(it.params.overlap)) {
    if (it.pending.empty()) s.commit();
    else s.commit_to(it.pending.front().cp->events);
  }
  return s.release([&](const RunEvent& ev) { return r.sink(ev); });
}

std::string ExecutorImpl::iter_after_token(Run& r, std::string reason) {
  IterState& it = *r.iter;
  RunState& s = *r.state;
  const auto now = Clock::now();
  if (it.last_token != Clock::time_point{}) {
    const double dt = ms_between(it.last_token, now);
    it.ms_per_token = it.ms_per_token == 0 ? dt : 0.8 * it.ms_per_token + 0.2 * dt;
  }
  it.last_token = now;
  if (reason == "cancelled") return reason;
  const bool spec = is_speculative(it.params.overlap);
  if (!reason.empty()) {
    if (!spec || it.pending.empty()) return release_settled(r) ? reason : "cancelled";
    // The run ended under a context not verified yet: verify before it finishes.
    if (it.params.overlap == RetrievalOverlap::kSpeculative) verify_pending(r);
    set_hold(r, true);
    return "";
  }
  const int g = s.generated();
  if (g >= it.next_boundary) {
    it.next_boundary = g + it.params.retrieval_interval;
    switch (it.params.overlap) {
      case RetrievalOverlap::kNone: {
        const uint64_t t = issue_search(r, {iter_query(r, g)}, it.nprobe);
        if (t) {
          it.ahead = IterState::Ahead{t, g, std::nullopt};
          it.waiting_boundary = g;
          set_hold(r, true);
        }
        break;
      }
      case RetrievalOverlap::kPipeRag:
        if (!it.ahead || it.ahead->boundary != g) {  // nothing ran ahead (refused): search now
          const uint64_t t = issue_search(r, {iter_query(r, g)}, it.nprobe);
          if (!t) break;
          it.ahead = IterState::Ahead{t, g, std::nullopt};
        }
        it.waiting_boundary = g;
        if (it.ahead->result) take_ahead(r);
        else set_hold(r, true);
        break;
      case RetrievalOverlap::kSpeculative:
      case RetrievalOverlap::kBoth: speculate(r, g); break;
    }
  }
  if (!spec) return "";
  return release_settled(r) ? std::string() : std::string("cancelled");
}

void ExecutorImpl::speculate(Run& r, int boundary) {
  IterState& it = *r.iter;
  RunState& s = *r.state;
  const auto now = Clock::now();
  it.stride.observe_step_ms(ms_between(it.last_boundary, now));
  it.last_boundary = now;
  IterState::Pending p;
  p.boundary = boundary;
  p.query = iter_query(r, boundary);
  std::vector<ContextDoc> spec = it.context;  // no embedding: speculate that nothing changes
#if RAGD_HAVE_RETRIEVAL
  if (corpus_) {
    auto qv = corpus_->embed_query(p.query);
    auto probed = qv.ok() ? corpus_->coarse_lists(*qv, it.nprobe) : Result<std::vector<std::vector<int64_t>>>(qv.status());
    if (probed.ok()) {
      spec = it.cache.top_k(*qv, it.k, probed->at(0));
      sort_prompt_order(spec);
    }
  }
#endif
  p.spec_ids = chunk_ids(spec);
  p.prev_ids = chunk_ids(it.context);
  p.cp.emplace(s.checkpoint());
  p.forced_miss = opts_.test_hooks.force_misspeculation && opts_.test_hooks.force_misspeculation(r.rr.id, boundary);
  const bool both = it.params.overlap == RetrievalOverlap::kBoth;
  const int stride = it.stride.stride(it.params.max_stride);
  // Decoding on under the speculation pays only when it is right often enough: speculative needs
  // an OS3 stride above 1 (or a batch already open); both needs half of the recent verdicts right.
  // Otherwise the run waits for this boundary's search, as the sequential run does, and the
  // verdict still feeds the accuracy window.
  p.applied = p.forced_miss || (both ? it.stride.hit_rate() >= 0.5 : stride > 1 || !it.pending.empty());
  if (p.applied && p.spec_ids != p.prev_ids) {
    change_context(r, std::move(spec));
    announce_context(r, boundary);
  }
  it.pending.push_back(std::move(p));
  const bool applied = it.pending.back().applied;
  if (both) {
    it.pending.back().ticket = issue_search(r, {it.pending.back().query}, it.nprobe);
    if (!applied || static_cast<int>(it.pending.size()) > it.params.max_stride) set_hold(r, true);
  } else if (!applied || static_cast<int>(it.pending.size()) >= stride) {
    verify_pending(r);
  }
}

void ExecutorImpl::verify_pending(Run& r) {
  IterState& it = *r.iter;
  std::vector<std::string> queries;
  for (const auto& p : it.pending)
    if (!p.ticket) queries.push_back(p.query);
  if (!queries.empty()) {
    const uint64_t t = issue_search(r, std::move(queries), it.nprobe);
    if (!t) return;
    for (auto& p : it.pending)
      if (!p.ticket) p.ticket = t;
    it.verifying = true;
    it.verify_since = Clock::now();
  }
  set_hold(r, true);
}

void ExecutorImpl::rollback(Run& r, const IterState::Pending& p, std::vector<ContextDoc> real) {
  IterState& it = *r.iter;
  RunState& s = *r.state;
  it.rolled_back += s.generated() - p.boundary;
  const std::vector<uint64_t> prev = p.prev_ids;
  const int boundary = p.boundary;
  s.restore(*p.cp);  // generated tokens and events after the boundary go (p's context event too)
  it.pending.clear();  // p is gone from here on
  ++it.epoch;          // searches in flight were for the discarded tokens
  it.verifying = false;
  it.next_boundary = boundary + it.params.retrieval_interval;
  it.last_boundary = Clock::now();
  const std::vector<uint64_t> ids = chunk_ids(real);
  if (ids != chunk_ids(it.context)) {
    change_context(r, std::move(real));
  } else {
    Status st = sched_->restart(r.sid, s.prompt_len(), s.generated(), static_cast<int>(s.tokens().size()), *kv_host_);
    if (!st.ok()) r.iter_failure = st;
  }
  if (ids != prev) announce_context(r, boundary);
}

void ExecutorImpl::settle(Run& r) {
  IterState& it = *r.iter;
  while (!it.pending.empty() && it.pending.front().result) {
    IterState::Pending& p = it.pending.front();
    const SearchOutcome& o = *p.result;
    if (!o.status.ok()) {
      r.iter_failure = Status::Unavailable("iterative retrieval failed: " + o.status.to_string());
      return;
    }
    for (size_t i = 0; i < o.hits.size() && i < o.vectors.size(); ++i)
      it.cache.add(o.hits[i], o.vectors[i], i < o.lists.size() ? o.lists[i] : -1);
    std::vector<ContextDoc> real = top_docs(o, it.k);
    const bool right = chunk_ids(real) == p.spec_ids;
    it.stride.observe(right);
    ++(right && !p.forced_miss ? it.hits : it.misses);
    if (!p.applied) {  // the run waited here: the real context goes in as in the sequential run
      const int boundary = p.boundary;
      it.pending.pop_front();
      if (chunk_ids(real) != chunk_ids(it.context)) {
        change_context(r, std::move(real));
        announce_context(r, boundary);
      }
      continue;
    }
    if (right && !p.forced_miss) {
      it.pending.pop_front();
      continue;
    }
    ++it.rollbacks;
    rollback(r, p, std::move(real));
    break;
  }
  const bool ended = !r.state->finish_reason().empty();
  bool hold = it.verifying || (ended && !it.pending.empty());
  if (it.params.overlap == RetrievalOverlap::kBoth)
    hold = hold || static_cast<int>(it.pending.size()) > it.params.max_stride ||
           (!it.pending.empty() && !it.pending.back().applied);
  set_hold(r, hold);
}

void ExecutorImpl::iter_search_done(SearchDone d) {
  auto f = runs_.find(d.sid);
  if (f == runs_.end() || !f->second->iter) return;  // finished or cancelled meanwhile
  Run& r = *f->second;
  IterState& it = *r.iter;
  if (d.epoch != it.epoch) return;  // issued before a rollback
  if (it.ahead && it.ahead->ticket == d.ticket) {
    it.ahead->result = std::move(d.results.at(0));
    if (it.waiting_boundary == it.ahead->boundary) take_ahead(r);
  } else {
    size_t j = 0;
    for (auto& p : it.pending)
      if (p.ticket == d.ticket && j < d.results.size()) p.result = std::move(d.results[j++]);
    if (it.verifying && j > 0 && it.params.overlap == RetrievalOverlap::kSpeculative) {
      it.stride.observe_verify_ms(ms_between(it.verify_since, Clock::now()));
      it.verifying = false;
    }
    settle(r);
  }
  if (r.iter_failure) return fail(r.sid, *r.iter_failure);
  if (!release_settled(r)) return finish(r.sid, "cancelled");
  if (!it.held && it.pending.empty() && !r.state->finish_reason().empty()) finish(r.sid, r.state->finish_reason());
}

}  // namespace ragd::pipelines
