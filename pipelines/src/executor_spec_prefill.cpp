// Speculative prefill for one-shot RAG runs (RAGCache's speculative pipelining): the search runs
// in stages (IVF nprobe / 4, / 2, then the pipeline's nprobe) and each stage's top-k, when it
// differs from the last one, becomes the run's prompt at once, so prefill starts before the search
// ends. A change of candidates rebuilds the prompt and keeps the KV up to the first changed token
// (the abandoned part is recomputed); when the final result equals the candidates the prefill is
// used as is. The first token is not sampled before the final result is in: logits computed
// earlier wait with the run, and are used only if the prompt did not change since. The speculation
// runs only while the batch has room (no waiting run, a free running slot); otherwise the run is
// held until its search ends. Searches that are not IVF (or not trained yet) have one stage: the
// run is then a plain one. Every stage is searched and fetched in the run's tenant scope.
#include <algorithm>
#include <thread>

#include "executor_impl.h"
#include "ragd/common/log.h"
#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#endif

namespace ragd::pipelines {

void ExecutorImpl::prepare_speculative(std::unique_ptr<Run> r) {
#if RAGD_HAVE_RETRIEVAL
  const auto t0 = Clock::now();
  const RunRequest& q = r->rr;
  const int k = retrieval_k(*r);
  const int np = std::max(1, r->res.spec->nprobe);
  std::vector<int> stages;
  for (int s : {np / 4, np / 2, np})
    if (s >= 1 && (stages.empty() || s > stages.back())) stages.push_back(s);
  const uint64_t sid = r->sid;
  bool handed = false;
  std::vector<uint64_t> last_ids;
  std::vector<retrieval::Neighbor> final_nb;
  auto to_docs = [&](std::vector<retrieval::Hit>& hits, std::vector<Source>* ranked) {
    rank_hits(hits);  // as search_passages ranks them
    std::vector<ContextDoc> docs;
    for (auto& h : hits) {
      docs.push_back(context_doc(h));
      if (ranked) ranked->push_back(docs.back().source);
    }
    sort_prompt_order(docs);
    return docs;
  };
  auto post = [&](PrefillCandidate c) {
    std::lock_guard<std::mutex> lk(mu_);
    candidates_.push_back(std::move(c));
    cv_.notify_all();
  };
  const double stage_delay = opts_.test_hooks.search_delay_ms / static_cast<double>(stages.size());
  const retrieval::ReadScope scope = read_scope(*r);
  Status st = corpus_->search_progressive(
      q.query, k, stages, scope,
      [&](size_t stage, int nprobe, const std::vector<retrieval::Neighbor>& nb) {
        // A remote index streams its stages: the modelled round trip is spread over them.
        if (stage_delay > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(stage_delay));
        final_nb = nb;  // the last stage reported is the search's result
        // The last stage; or a single-stage search (Flat, HNSW, an IVF index still staging:
        // nprobe 0); or every list scanned before the planned last stage.
        if (stage + 1 == stages.size() || nprobe == 0 || nprobe < stages[stage]) return true;
        std::vector<uint64_t> ids;
        for (const auto& n : nb) ids.push_back(n.id);
        std::sort(ids.begin(), ids.end());
        if (ids.empty() || ids == last_ids) return true;
        auto hits = corpus_->fetch_hits(nb, scope);
        if (!hits.ok() || static_cast<int>(hits->size()) < std::min<int>(k, static_cast<int>(nb.size()))) return true;
        last_ids = ids;
        std::vector<ContextDoc> docs = to_docs(*hits, nullptr);
        if (handed) {
          post(PrefillCandidate{sid, std::move(docs), {}, false, Status::OK()});
          return true;
        }
        // First candidates: the run goes to the scheduler now, on them.
        PromptSegments p = rag_prompt(*r, docs);
        r->prompt = p.flat();
        r->path.assign(p.segs.begin(), p.segs.end() - 1);
        r->spec_prefill.emplace();
        r->spec_prefill->ids = ids;
        r->spec_prefill->wait_ms = ms_between(t0, Clock::now());
        handed = true;
        hand_over(std::move(r));
        return true;
      });
  std::vector<Source> ranked;
  std::vector<ContextDoc> docs;
  if (st.ok()) {
    auto hits = corpus_->fetch_hits(final_nb, scope);
    if (hits.ok()) docs = to_docs(*hits, &ranked);
    else st = hits.status();
  }
  if (handed) {
    post(PrefillCandidate{sid, std::move(docs), std::move(ranked), true,
                          st.ok() ? Status::OK() : Status::Unavailable("retrieval failed: " + st.to_string())});
    return;
  }
  // No stage before the last had candidates (one stage, or nothing found early): a plain run.
  r->timings.retrieval_ms = ms_between(t0, Clock::now());
  if (!st.ok()) {
    r->set_failure("retrieval", st);
  } else {
    RunEvent ev;
    ev.kind = RunEvent::Kind::kSources;
    ev.sources = ranked;
    if (!emit(*r, ev)) r->error = "cancelled";
    PromptSegments p = rag_prompt(*r, docs);
    r->prompt = p.flat();
    r->path.assign(p.segs.begin(), p.segs.end() - 1);
  }
  hand_over(std::move(r));
#else
  r->error = "this build has no retrieval module";
  hand_over(std::move(r));
#endif
}

Status ExecutorImpl::rebuild_prompt(Run& r, const std::vector<ContextDoc>& docs) {
  RunState& s = *r.state;
  std::vector<int32_t> prompt = rag_prompt(r, docs).flat();
  const int max_pos = model_->config().max_position_embeddings;
  if (max_pos > 0 && static_cast<int>(prompt.size()) + s.max_new_tokens() >= max_pos)
    return Status::InvalidArgument("a context of " + std::to_string(prompt.size()) +
                                   " tokens + max_tokens does not fit the model context of " + std::to_string(max_pos));
  const std::vector<int32_t> old = s.tokens();
  s.replace_prompt(std::move(prompt));
  const auto& now = s.tokens();
  size_t keep = 0;
  while (keep < old.size() && keep < now.size() && old[keep] == now[keep]) ++keep;
  if (sched_->contains(r.sid))
    RAGD_RETURN_IF_ERROR(sched_->restart(r.sid, s.prompt_len(), s.generated(), static_cast<int>(keep), *kv_host_));
  if (s.generated() == 0) r.usage.prompt_tokens = s.prompt_len();
  r.prompt.assign(now.begin(), now.begin() + s.prompt_len());
  // The reuse plan described the previous prompt: nothing of it is installed or published again.
  ReusePlan& p = r.kv.reuse;
  p.docs.clear();
  p.ends.clear();
  p.load.reset();
  p.chunk_load.reset();
  p.chunk_nodes.clear();
  p.pin.release();
  p.chunk_pin.release();
  p.installed_nodes = 0;
  p.published = true;
  return Status::OK();
}

void ExecutorImpl::spec_hold(Run& r, bool on) {
  Run::SpecPrefill& sp = *r.spec_prefill;
  if (sp.held == on) return;
  sp.held = on;
  sched_->hold(r.sid, on);
  const auto now = Clock::now();
  if (on) sp.wait_since = now;
  else sp.wait_ms += ms_between(sp.wait_since, now);
}

void ExecutorImpl::apply_candidate(PrefillCandidate c) {
  auto f = runs_.find(c.sid);
  if (f == runs_.end() || !f->second->spec_prefill || !f->second->state) return;  // finished meanwhile
  Run& r = *f->second;
  Run::SpecPrefill& sp = *r.spec_prefill;
  if (!c.status.ok()) return fail(r.sid, c.status);
  std::vector<uint64_t> ids = chunk_ids(c.docs);
  if (ids != sp.ids) {
    if (Status st = rebuild_prompt(r, c.docs); !st.ok()) return fail(r.sid, st);
    sp.ids = std::move(ids);
    sp.logits.reset();
    ++sp.restarts;
    if (!c.final) spec_hold(r, false);  // recompute the changed part now
  }
  if (!c.final) return;
  sp.confirmed = true;
  r.timings.retrieval_ms = ms_between(r.t_submit, Clock::now());  // the search ended now
  RunEvent ev;
  ev.kind = RunEvent::Kind::kSources;
  ev.sources = std::move(c.sources);
  r.state->push_event(std::move(ev));
  if (!r.state->release([&](const RunEvent& e) { return r.sink(e); })) return finish(r.sid, "cancelled");
  std::optional<std::vector<float>> logits = std::move(sp.logits);
  sp.logits.reset();
  spec_hold(r, false);
  if (logits) after_feed(r, *logits, true);
}

}  // namespace ragd::pipelines
