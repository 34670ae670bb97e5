#include "speculative_prefill.h"

#include <algorithm>
#include <thread>

#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#endif

namespace ragd::pipelines {

namespace {
double ms_since(SpeculativePrefill::Clock::time_point a, SpeculativePrefill::Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
}  // namespace

std::optional<SpeculativePrefill::Plain> SpeculativePrefill::search(const Search& s) {
#if RAGD_HAVE_RETRIEVAL
  const int k = s.k;
  const int np = std::max(1, s.nprobe);
  std::vector<int> stages;
  for (int st : {np / 4, np / 2, np})
    if (st >= 1 && (stages.empty() || st > stages.back())) stages.push_back(st);
  bool handed = false;
  std::vector<uint64_t> last_ids;
  std::vector<retrieval::Neighbor> final_nb;
  const double stage_delay = s.delay_ms / static_cast<double>(stages.size());
  const retrieval::ReadScope& scope = *s.scope;
  Status st = s.corpus->search_progressive(
      s.query, k, stages, scope,
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
        auto hits = s.corpus->fetch_hits(nb, scope);
        if (!hits.ok() || static_cast<int>(hits->size()) < std::min<int>(k, static_cast<int>(nb.size()))) return true;
        last_ids = ids;
        std::vector<ContextDoc> docs = s.docs(*hits, nullptr);
        if (handed) {
          s.post(Candidate{s.sid, std::move(docs), {}, false, Status::OK()});
          return true;
        }
        // First candidates: the run goes to the scheduler now, on them.
        std::unique_ptr<SpeculativePrefill> unit(
            new SpeculativePrefill(s.sid, s.t_submit, std::move(ids), ms_since(s.t_start, Clock::now())));
        handed = true;
        s.start(std::move(docs), std::move(unit));
        return true;
      });
  Plain out;
  if (st.ok()) {
    auto hits = s.corpus->fetch_hits(final_nb, scope);
    if (hits.ok()) out.docs = s.docs(*hits, &out.sources);
    else st = hits.status();
  }
  if (handed) {
    s.post(Candidate{s.sid, std::move(out.docs), std::move(out.sources), true,
                     st.ok() ? Status::OK() : Status::Unavailable("retrieval failed: " + st.to_string())});
    return std::nullopt;
  }
  // No stage before the last had candidates (one stage, or nothing found early): a plain run.
  out.status = st;
  return out;
#else
  (void)s;
  return Plain{Status::Unavailable("this build has no retrieval module"), {}, {}};
#endif
}

void SpeculativePrefill::set_hold(bool on, RunLoop& loop) {
  if (held_ == on) return;
  held_ = on;
  loop.hold(sid_, on);
  const auto now = Clock::now();
  if (on) wait_since_ = now;
  else wait_ms_ += ms_since(wait_since_, now);
}

void SpeculativePrefill::keep_first_token(std::span<const float> logits, RunLoop& loop) {
  // The prompt rests on candidates of a search still running: keep the logits, wait for it.
  logits_.emplace(logits.begin(), logits.end());
  set_hold(true, loop);
}

void SpeculativePrefill::on_scheduled(bool batch_has_room, RunLoop& loop) {
  // The speculation runs only while the batch has room; otherwise the run waits for the search.
  if (!batch_has_room) set_hold(true, loop);
}

void SpeculativePrefill::on_candidate(Candidate c, RunLoop& loop) {
  if (!c.status.ok()) return loop.fail(sid_, c.status);
  std::vector<uint64_t> ids = chunk_ids(c.docs);
  if (ids != ids_) {
    if (Status st = loop.rebuild_prompt(sid_, c.docs); !st.ok()) return loop.fail(sid_, st);
    ids_ = std::move(ids);
    logits_.reset();
    ++restarts_;
    if (!c.final) set_hold(false, loop);  // recompute the changed part now
  }
  if (!c.final) return;
  confirmed_ = true;
  retrieval_ms_ = ms_since(t_submit_, Clock::now());  // the search ended now
  if (!loop.release_sources(sid_, std::move(c.sources))) return loop.finish(sid_, "cancelled");
  std::optional<std::vector<float>> logits = std::move(logits_);
  logits_.reset();
  set_hold(false, loop);
  if (logits) loop.feed_first_token(sid_, *logits);  // last: it may end the run (and this unit)
}

void SpeculativePrefill::on_finish(RunLoop& loop, Usage& usage, Timings& timings) {
  if (held_) set_hold(false, loop);
  usage.speculative_prefill = true;
  usage.prefill_restarts = restarts_;
  timings.search_wait_ms = wait_ms_;
  if (confirmed_) timings.retrieval_ms = retrieval_ms_;
}

}  // namespace ragd::pipelines
