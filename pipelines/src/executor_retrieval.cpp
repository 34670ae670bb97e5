// The run loop's retrieval: search_passages (any thread) runs a batch of queries in the run's tenant
// scope and ranks the hits, context_doc and rag_prompt turn hits into the RAG prompt; and the
// retrieval side of IterativeRag::RunLoop (scheduler thread: searches on the retrieval pool,
// query embeddings).
#include <algorithm>
#include <thread>

#include "executor_impl.h"
#include "ragd/common/log.h"
#include "ragd/common/utf8.h"
#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#endif

namespace ragd::pipelines {

#if RAGD_HAVE_RETRIEVAL
ContextDoc ExecutorImpl::context_doc(retrieval::Hit& h) const {
  ContextDoc d;
  d.chunk_id = h.chunk.id;
  d.tokens = h.chunk.token_ids.empty() ? tok_->encode(h.chunk.text, false, false) : std::move(h.chunk.token_ids);
  d.source.doc_id = h.chunk.doc_id;
  d.source.chunk_id = h.chunk.id;
  d.source.score = h.score;
  d.source.snippet = h.chunk.text.substr(0, utf8_floor(h.chunk.text, std::min<size_t>(240, h.chunk.text.size())));
  d.source.title = h.title;
  d.source.url = h.url;
  d.source.section = h.chunk.section;
  d.source.page = h.page;
  d.source.byte_begin = h.chunk.byte_begin;
  d.source.byte_end = h.chunk.byte_end;
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
                                                         int k, int fetch, int nprobe, retrieval::RetrievalMode mode,
                                                         const retrieval::MetadataFilter* filter,
                                                         const std::string& must_include, bool vectors) {
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
  sp.mode = mode;
  sp.metadata = filter;
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
  (void)tenant, (void)k, (void)fetch, (void)mode, (void)filter, (void)must_include, (void)vectors, (void)t0;
  return fail_all(Status::FailedPrecondition("this build has no retrieval module"));
#endif
}

bool ExecutorImpl::issue_search(uint64_t sid, uint64_t ticket, uint64_t epoch, std::vector<std::string> queries,
                                int fetch, int nprobe, bool vectors) {
  const Run& r = *runs_.at(sid);
  auto task = [this, sid, ticket, epoch, queries = std::move(queries), tenant = r.rr.tenant,
               must = r.rr.context_must_include, k = r.res.retrieval_k, fetch, nprobe, mode = r.res.retrieval_mode,
               filter = r.res.filter, vectors] {
    SearchDone d{sid, ticket, epoch, search_passages(queries, tenant, k, fetch, nprobe, mode, filter.get(), must, vectors)};
    std::lock_guard<std::mutex> lk(mu_);
    searches_done_.push_back(std::move(d));
    cv_.notify_all();
  };
  return retrieval_pool_->submit(r.rr.tenant, std::move(task));
}

bool ExecutorImpl::embed_query(const std::string& query, int nprobe, std::vector<float>* qv,
                               std::vector<int64_t>* lists) {
#if RAGD_HAVE_RETRIEVAL
  if (!corpus_) return false;
  auto v = corpus_->embed_query(query);
  if (!v.ok()) return false;
  auto probed = corpus_->coarse_lists(*v, nprobe);
  if (!probed.ok()) return false;
  *qv = std::move(*v);
  *lists = std::move(probed->at(0));
  return true;
#else
  (void)query, (void)nprobe, (void)qv, (void)lists;
  return false;
#endif
}

Status ExecutorImpl::restart_kv(uint64_t sid) {
  const RunState& s = *runs_.at(sid)->state;
  return sched_->restart(sid, s.prompt_len(), s.generated(), static_cast<int>(s.tokens().size()), *kv_host_);
}

bool ExecutorImpl::release_events(uint64_t sid) {
  Run& r = *runs_.at(sid);
  return r.state->release([&](const RunEvent& ev) { return r.sink(ev); });
}

bool ExecutorImpl::force_misspeculation(uint64_t sid, int boundary) {
  return opts_.test_hooks.force_misspeculation && opts_.test_hooks.force_misspeculation(runs_.at(sid)->rr.id, boundary);
}

}  // namespace ragd::pipelines
