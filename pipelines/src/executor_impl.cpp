#include "executor_impl.h"

#include <algorithm>
#include <numeric>
#include <filesystem>

#include "ragd/common/check.h"
#include "ragd/common/echo.h"
#include "ragd/common/log.h"
#include "ragd/kernels/threads.h"
#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#include "ragd/retrieval/lexical_terms.h"
#include "tool_constraint.h"
#endif

namespace ragd::pipelines {

Result<std::unique_ptr<ExecutorImpl>> ExecutorImpl::create(const RuntimeOptions& opts, Deps deps) {
  if (!deps.model) return Status::InvalidArgument("executor: no model");
  if (!deps.tokenizer) return Status::InvalidArgument("executor: no tokenizer");
  RAGD_RETURN_IF_ERROR(opts.validate());
  SchedulerOptions so = opts.scheduler;
  if (!opts.length_model.empty()) {
    RAGD_ASSIGN_OR_RETURN(so.length_model, LengthModel::load(opts.length_model));
  }
  std::unique_ptr<LengthLogWriter> length_log;
  if (!opts.length_log.empty()) {
    RAGD_ASSIGN_OR_RETURN(length_log, LengthLogWriter::open(opts.length_log));
  }
  // The one KV cache: the engine pool is its HBM tier; DRAM always; SSD under the data dir.
  kvstore::Options ko = opts.kvstore_options();
  ko.pool = &deps.model->kv_pool();
  const kvstore::KvFormat fmt = kvstore::KvFormat::from_layout(deps.model->kv_pool().layout(), deps.model->fingerprint());
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<kvstore::KvStore> store, kvstore::KvStore::open(ko, fmt));
  std::unique_ptr<ExecutorImpl> ex(new ExecutorImpl(opts, std::move(deps)));
  ex->store_ = std::move(store);
  ExecutorImpl* raw = ex.get();
  ex->planner_ = std::make_unique<ReusePlanner>(*ex->store_, *ex->model_, [raw] {
    std::lock_guard<std::mutex> lk(raw->mu_);
    raw->load_done_ = true;
    raw->cv_.notify_all();
  });
  ex->planner_->set_blend_check(opts.blend_check);
  ex->planner_->set_defer_repair(!opts.test_hooks.blend_repair_at_admission);
  // A finished pool-to-DRAM copy holds a fork of its blocks until the scheduler's next pool call:
  // wake the scheduler so that the blocks come back at once, even with no request to follow.
  ex->store_->set_on_pool_copy_done([raw] {
    std::lock_guard<std::mutex> lk(raw->mu_);
    raw->copies_done_ = true;
    raw->cv_.notify_all();
  });
  ex->sched_ = std::make_unique<Scheduler>(so);
  ex->length_log_ = std::move(length_log);
  ex->batch_tokens_ = so.max_batch_tokens;
  ex->kv_host_ = std::make_unique<PoolKvHost>(ex->model_->kv_pool(), *ex->planner_, opts.swap_bytes);
  ex->publish_stats();
  ex->thread_ = std::thread([raw] { raw->loop(); });
  return ex;
}

namespace {

SequenceParallelRoute::Limits sp_limits(const RuntimeOptions& opts, engine::Model& model) {
  SequenceParallelRoute::Limits l;
  l.policy.threshold_tokens = opts.sp_threshold_tokens;
  l.policy.pool_blocks = static_cast<int64_t>(model.kv_pool().num_blocks());
  l.policy.block_size = model.kv_pool().layout().block_size;
  l.policy.chunk_tokens = opts.sp_chunk_tokens;
  l.spill_chunk_tokens = opts.kv_spill_chunk_tokens;
  l.policy.rates = opts.sp_rates;
  l.policy.model = model.config();
  l.policy.kv_bytes_per_token_layer =
      static_cast<double>(model.kv_pool().layout().token_bytes()) / std::max(1, model.config().num_hidden_layers);
  return l;
}

}  // namespace

ExecutorImpl::ExecutorImpl(const RuntimeOptions& opts, Deps deps)
    : opts_(opts),
      model_(std::move(deps.model)),
      sp_(deps.sp ? std::make_unique<SequenceParallelRoute>(std::move(deps.sp_rank0), std::move(deps.sp),
                                                            sp_limits(opts, *model_),
                                                            static_cast<SequenceParallelRoute::RunLoop&>(*this))
                  : nullptr),
      tok_(std::move(deps.tokenizer)),
      corpus_(std::move(deps.corpus)),
      semantic_(deps.semantic_cache ? std::move(deps.semantic_cache) : std::make_shared<SemanticCache>()),
      output_ngrams_(static_cast<size_t>(std::max(0, opts.speculative.answer_ngrams))),
      specs_(std::move(deps.pipelines)),
      model_name_(std::move(deps.model_name)),
      reranker_(std::move(deps.reranker)),
      cross_encoders_(std::move(deps.cross_encoders)) {
  prompts_ = std::make_unique<PromptBuilder>(*tok_, model_->config(), std::move(deps.chat_template));
  draft_models_ = std::move(deps.draft_models);
  retrieval_pool_ = std::make_unique<FairPool>(static_cast<size_t>(std::max(1, opts.retrieval_threads)),
                                               static_cast<size_t>(std::max(1, opts.max_queue)),
                                               static_cast<size_t>(std::max(0, opts.retrieval_threads_per_tenant)),
                                               "retrieval");
}

ExecutorImpl::~ExecutorImpl() { stop(); }

void ExecutorImpl::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stopping_ = true;
  cv_.notify_all();
  // The scheduler thread ends once every prepared run is handed over and finished; the retrieval
  // pool keeps serving it (preparations, iterative runs' searches) until then.
  if (thread_.joinable()) thread_.join();
  sp_.reset();  // no run is on the route any more: the scheduler thread waited for them
  retrieval_pool_->stop();
  if (!store_) return;
  // The scheduler thread has exited, so this thread owns the pool now: move cached KV that is
  // only in the pool down to DRAM (and so, write-behind, to SSD), then make the SSD tier durable.
  store_->detach_pool();
  Status st = store_->flush();
  if (!st.ok()) log::pipelines()->warn("kvstore flush at stop failed: {}", st.to_string());
  store_->close();
}

std::vector<PipelineInfo> ExecutorImpl::pipelines() const {
  std::vector<PipelineInfo> v;
  for (const auto& s : specs_) v.push_back(s.info());
  return v;
}

engine::ConstraintCache& ExecutorImpl::constraints() {
  std::call_once(constraints_once_, [this] {
    constraints_ = std::make_unique<engine::ConstraintCache>(engine::TokenVocabulary::from_tokenizer(*tok_));
    constraints_ready_.store(true, std::memory_order_release);
  });
  return *constraints_;
}

Status ExecutorImpl::submit(RunRequest req, EventSink sink) {
  if (stopping_) return Status::Unavailable("executor is stopping");
  if (!sink) return Status::InvalidArgument("submit: no event sink");
  auto r = std::make_unique<Run>();
  const PipelineSpec* spec = nullptr;
  if (!req.pipeline.empty()) {
    auto it = std::find_if(specs_.begin(), specs_.end(), [&](const PipelineSpec& s) { return s.name == req.pipeline; });
    if (it == specs_.end()) return Status::NotFound("pipeline '" + req.pipeline + "' not found");
    spec = &*it;
  }
  // Tools: the answer follows the model's tool-call format (a 400 for tools it cannot honour).
  RAGD_ASSIGN_OR_RETURN(auto tool_spec, tool_constraint(req, prompts_->tool_call_format()));
  if (tool_spec) req.sampling.constraint = std::move(tool_spec);
  RAGD_ASSIGN_OR_RETURN(r->res, resolve_run(req, spec));
  RAGD_RETURN_IF_ERROR(choose_draft_model(*r));
  if (r->res.sampling.constraint) {
    // Compiled (or found in the cache) now, so that a bad schema is the caller's 400.
    RAGD_ASSIGN_OR_RETURN(r->constraint, constraints().get(*r->res.sampling.constraint));
  }
  for (size_t i = 0; i < req.prompt_ids.size(); ++i)
    if (req.prompt_ids[i] < 0 || req.prompt_ids[i] >= tok_->vocab_size())
      return Status::InvalidArgument("prompt token id " + std::to_string(req.prompt_ids[i]) + " at index " + std::to_string(i) +
                                     " is outside the vocabulary [0, " + std::to_string(tok_->vocab_size()) + ")");
  r->kv.reuse.mode = r->res.reuse;
  r->kv.reuse.blend = r->res.blend;
  r->kv.reuse.scope = kvstore::kv_scope(req.kv_scope, req.cache_salt);
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (pending_ + static_cast<int>(inbox_.size()) + static_cast<int>(live_names_.size()) >= opts_.max_queue)
      return Status::ResourceExhausted("executor queue is full (" + std::to_string(opts_.max_queue) + " requests)");
    r->sid = next_sid_++;
    if (req.id.empty()) req.id = "run-" + std::to_string(r->sid);
    if (live_names_.count(req.id)) return Status::AlreadyExists("request id '" + req.id + "' is already running");
    live_names_.insert(req.id);
    ++pending_;
  }
  if (r->res.adapt && r->res.iterative) {
    r->rr.query = req.query;  // adapt_run reads the question and tenant (r->rr is filled below)
    r->rr.tenant = req.tenant;
    adapt_run(*r, nullptr);  // iterative: before any search, on the question and the load
  }
  if (r->res.iterative)
    r->iter = std::make_unique<IterativeRag>(r->sid, *r->res.iterative, r->res.retrieval_k, spec->nprobe, req.query, tok_);
  r->rr = std::move(req);
  r->sink = std::move(sink);
  r->t_submit = Clock::now();
  auto* raw = r.release();
  // The retrieval threads are shared fairly among tenants: one tenant's searches and reranking
  // hold at most its share of them (FairPool).
  if (!retrieval_pool_->submit(raw->rr.tenant, [this, raw] { prepare(std::unique_ptr<Run>(raw)); })) {
    std::unique_ptr<Run> back(raw);
    std::lock_guard<std::mutex> lk(mu_);
    --pending_;
    live_names_.erase(back->rr.id);
    adapt_work_.erase(back->sid);
    return Status::ResourceExhausted("executor retrieval queue is full");
  }
  return Status::OK();
}

void ExecutorImpl::cancel(const std::string& request_id) {
  std::lock_guard<std::mutex> lk(mu_);
  cancels_.push_back(request_id);
  cv_.notify_all();
}

#if RAGD_HAVE_RETRIEVAL
// Makes sure the first chunk of document `id` (the tenant's own or a shared one) is among `hits`:
// when retrieval did not return it, it takes the place of the lowest-ranked hit (hits are in score
// order), or is added when fewer than k came back.
Status ExecutorImpl::include_document(const std::string& id, const std::string& tenant, int k,
                                      std::vector<retrieval::Hit>* hits) const {
  for (const auto& h : *hits)
    if (h.chunk.doc_id == id) return Status::OK();
  RAGD_ASSIGN_OR_RETURN(auto doc, corpus_->get_document(id, tenant));
  if (!doc || doc->chunk_ids.empty())
    return Status::InvalidArgument("context_must_include: no document '" + clip_input(id) + "'");
  RAGD_ASSIGN_OR_RETURN(auto chunks, corpus_->get_chunks(std::span(doc->chunk_ids).first(1)));
  if (chunks.empty() || !chunks[0]) return Status::InvalidArgument("context_must_include: document '" + clip_input(id) + "' has no chunk");
  retrieval::Hit h;
  h.score = hits->empty() ? 0.0f : hits->back().score;
  h.tenant = doc->tenant;
  h.source = doc->source;
  h.title = doc->title;
  h.chunk = std::move(*chunks[0]);
  h.chunk.doc_id = doc->id;  // the id as its owner named it (the stored chunk names the owner's key)
  if (static_cast<int>(hits->size()) >= k && !hits->empty()) hits->back() = std::move(h);
  else hits->push_back(std::move(h));
  return Status::OK();
}
#endif

void ExecutorImpl::prepare(std::unique_ptr<Run> r) {
  const auto t0 = Clock::now();
  r->timings.retrieval_queue_ms = ms_between(r->t_submit, t0);
  const RunRequest& q = r->rr;
  // Speculative prefill speculates on the early stages of the vector index's progressive search.
  // A lexical or hybrid search has no stages and another result than the vector search: those
  // runs search once, as without the flag (the run a speculative one must equal).
#if RAGD_HAVE_RETRIEVAL
  if (r->res.speculative_prefill && corpus_ && !r->res.filter &&
      corpus_->resolve_mode(r->res.retrieval_mode) == retrieval::RetrievalMode::kDense) {
    return prepare_speculative(std::move(r));
  }
#endif
  if (r->res.spec) {
    int k = r->res.retrieval_k;
    std::vector<ContextDoc> ctx;
    if (k > 0) {
      IterativeRag* it = r->iter.get();
      const bool vectors = it && it->wants_vectors();
      const int fetch = it ? it->fetch() : k;  // as the unit's later searches
      const std::string query[1] = {q.query};
      SearchOutcome o =
          std::move(search_passages(query, q.tenant, k, fetch, r->res.spec->nprobe, r->res.retrieval_mode,
                                    r->res.filter.get(), q.context_must_include, vectors)[0]);
      if (!o.status.ok()) {
        r->set_failure("retrieval", o.status);
      } else {
        if (it) it->on_first_search(o);
        o.hits.resize(std::min<size_t>(o.hits.size(), k));
        if (r->res.adapt && !it) {
          adapt_run(*r, &o.hits);  // sets the run's top_k and rerank from the chosen candidate
          k = r->res.retrieval_k;
          o.hits.resize(std::min<size_t>(o.hits.size(), k));
        }
        ctx = std::move(o.hits);
        // BM25 scores or their weighted fusion with cosines (lexical search; hybrid search's
        // default fusion): cosines alone and fused ranks lie too close together for a ratio of
        // the first to mean the same. Not for reranked or adaptive runs: the reranker, or the
        // chosen candidate's top_k, decides.
        if (!it && r->res.rerank == 0 && !r->res.adapt && corpus_ &&
            corpus_->ranks_by_ratio_score(r->res.retrieval_mode)) {
          double ratio = r->res.min_score_ratio;
          if (ratio < 0)
            ratio = corpus_->resolve_mode(r->res.retrieval_mode) == retrieval::RetrievalMode::kLexical ? kLexicalScoreRatio
                                                                                                      : kFusedScoreRatio;
          keep_above_score_ratio(ctx, ratio);
        }
        if (r->res.rerank > 0 && !it) {
          const auto tr = Clock::now();
          const bool had_first = !ctx.empty();
          const uint64_t first_chunk = had_first ? ctx.front().source.chunk_id : 0;  // the retriever's first
          const std::string& rm = r->res.spec->rerank_model;
          PassageReranker* rr = reranker_.get();
          if (!rm.empty()) {
            auto ce = cross_encoders_.find(rm);
            rr = ce == cross_encoders_.end() ? nullptr : ce->second.get();
          }
          // The passages' prompt heads hold the tenant's documents: cached under the request's KV
          // scope, tenant and cache_salt both, like every other reusable KV.
          Status rs = rr ? rr->keep_best(*r->res.spec, q.query, r->kv.reuse.scope, &ctx, r->res.rerank)
                         : Status::FailedPrecondition("pipeline '" + r->res.spec->name +
                                                      "' reranks, but the runtime has no reranker" +
                                                      (rm.empty() ? std::string() : " for " + rm));
          r->timings.rerank_ms = ms_between(tr, Clock::now());
          if (!rs.ok()) r->set_failure("rerank", rs);
          else if (r->usage.adapt) adapt_reranked(*r, had_first && !ctx.empty() && ctx.front().source.chunk_id == first_chunk);
        }
      }
    }
    if (r->error.empty()) {
      RunEvent ev;
      ev.kind = RunEvent::Kind::kSources;
      for (const auto& d : ctx) ev.sources.push_back(d.source);
      sort_prompt_order(ctx);  // the same set of chunks gives the same path
      if (!emit(*r, ev)) r->error = "cancelled";
    }
    if (r->error.empty() && r->res.spec->semantic_cache) semantic_lookup(*r, ctx);
    r->timings.retrieval_ms = ms_between(t0, Clock::now());
    if (r->error.empty()) {
      PromptSegments p = rag_prompt(*r, ctx);
      if (r->iter) r->iter->set_context(std::move(ctx));
      r->prompt = p.flat();
      r->path.assign(p.segs.begin(), p.segs.end() - 1);
    }
  } else if (!q.messages.empty()) {
    // The model's template may refuse a conversation (raise_exception): a 400 with its message.
    auto prompt = prompts_->build_chat(q.messages, q.tools);
    if (prompt.ok()) r->prompt = std::move(*prompt);
    else r->set_failure("chat template", prompt.status());
  } else if (!q.prompt_ids.empty()) {
    r->prompt = q.prompt_ids;
  } else {
    r->prompt = prompts_->build_raw(q.prompt);
  }
  hand_over(std::move(r));
}

void ExecutorImpl::prepare_speculative(std::unique_ptr<Run> r) {
#if RAGD_HAVE_RETRIEVAL
  const auto t0 = Clock::now();
  const retrieval::ReadScope scope = read_scope(*r);
  SpeculativePrefill::Search s;
  s.sid = r->sid;
  s.t_submit = r->t_submit;
  s.t_start = t0;
  s.corpus = corpus_.get();
  s.query = r->rr.query;
  s.k = r->res.retrieval_k;
  s.nprobe = r->res.spec->nprobe;
  s.scope = &scope;
  s.delay_ms = opts_.test_hooks.search_delay_ms;
  s.docs = [this](std::vector<retrieval::Hit>& hits, std::vector<Source>* ranked) {
    rank_hits(hits);  // as search_passages ranks them
    std::vector<ContextDoc> docs;
    for (auto& h : hits) {
      docs.push_back(context_doc(h));
      if (ranked) ranked->push_back(docs.back().source);
    }
    sort_prompt_order(docs);
    return docs;
  };
  s.start = [&](std::vector<ContextDoc> docs, std::unique_ptr<SpeculativePrefill> unit) {
    PromptSegments p = rag_prompt(*r, docs);
    r->prompt = p.flat();
    r->path.assign(p.segs.begin(), p.segs.end() - 1);
    r->spec_prefill = std::move(unit);
    hand_over(std::move(r));
  };
  s.post = [this](SpeculativePrefill::Candidate c) {
    std::lock_guard<std::mutex> lk(mu_);
    candidates_.push_back(std::move(c));
    cv_.notify_all();
  };
  std::optional<SpeculativePrefill::Plain> plain = SpeculativePrefill::search(s);
  if (!plain) return;  // handed over on its first candidates
  r->timings.retrieval_ms = ms_between(t0, Clock::now());
  if (!plain->status.ok()) {
    r->set_failure("retrieval", plain->status);
  } else {
    RunEvent ev;
    ev.kind = RunEvent::Kind::kSources;
    ev.sources = std::move(plain->sources);
    if (!emit(*r, ev)) r->error = "cancelled";
    PromptSegments p = rag_prompt(*r, plain->docs);
    r->prompt = p.flat();
    r->path.assign(p.segs.begin(), p.segs.end() - 1);
  }
  hand_over(std::move(r));
#else
  r->error = "this build has no retrieval module";
  hand_over(std::move(r));
#endif
}

void ExecutorImpl::hand_over(std::unique_ptr<Run> r) {
  if (r->error.empty() && !sp_route(*r)) {
    // Lookup and, for a DRAM / SSD hit, an asynchronous load: this thread does not wait for it.
    const auto tl = Clock::now();
    planner_->lookup(r->prompt, r->path, &r->kv.reuse);
    r->timings.lookup_ms = ms_between(tl, Clock::now());
    r->timings.kv_load_ms += r->timings.lookup_ms;
  }
  r->t_ready = Clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  --pending_;
  inbox_.push_back(std::move(r));
  cv_.notify_all();
}

bool ExecutorImpl::emit(Run& r, const RunEvent& ev) {
  try {
    return r.sink(ev);
  } catch (...) {
    log::pipelines()->error("[{}] event sink threw; cancelling the run", r.rr.id);
    return false;
  }
}

void ExecutorImpl::accept(std::unique_ptr<Run> r) {
  const uint64_t sid = r->sid;
  Run& q = *r;
  runs_[sid] = std::move(r);
  by_name_[q.rr.id] = sid;
  if (early_cancels_.erase(q.rr.id)) q.error = "cancelled";
  if (!q.error.empty()) {
    if (q.error == "cancelled") return finish(sid, "cancelled");
    return fail(sid, Status(q.error_code, q.error));
  }
  const auto& cfg = model_->config();
  const int prompt_len = static_cast<int>(q.prompt.size());
  if (prompt_len == 0) return fail(sid, Status::InvalidArgument("prompt is empty after tokenization"));
  const bool sp = sp_route(q);
  if (cfg.max_position_embeddings > 0 && prompt_len >= cfg.max_position_embeddings)
    return fail(sid, Status::InvalidArgument("prompt of " + std::to_string(prompt_len) +
                                             " tokens does not fit the model context of " +
                                             std::to_string(cfg.max_position_embeddings)));
  int max_new = q.res.sampling.max_tokens;
  if (cfg.max_position_embeddings > 0) max_new = std::min(max_new, cfg.max_position_embeddings - prompt_len);
  const auto& pool = model_->kv_pool();
  const int bs = pool.layout().block_size;
  // A sequence-parallel run holds its share of the tokens in each worker's pool (sharded_sequence.h).
  const size_t need = sp ? static_cast<size_t>(sp_->kv_blocks_per_worker(prompt_len, max_new))
                         : static_cast<size_t>(run_kv_blocks(prompt_len + max_new, bs));
  // Never servable by this configuration, whatever the load: the caller's error (HTTP 400 naming the
  // limit), not a capacity one a client would retry (429). A group that spills takes what the pool
  // cannot hold (sequence_parallel_route.h).
  if (need > pool.num_blocks() && !(sp && sp_->spills()))
    return fail(sid, Status::InvalidArgument("prompt of " + std::to_string(prompt_len) + " tokens + max_tokens " +
                                               std::to_string(max_new) + " needs " + std::to_string(need) +
                                               " KV blocks; the pool has " + std::to_string(pool.num_blocks()) +
                                               " (raise kv_pool_bytes)"));
  std::vector<int32_t> stop_ids;
  if (!q.res.sampling.ignore_eos) {
    stop_ids = tok_->eos_ids();
    for (int e : cfg.eos_token_ids) stop_ids.push_back(e);
  }
  for (int32_t t : q.res.sampling.stop_token_ids) stop_ids.push_back(t);
  // A benchmark's hidden stop rule ends the run early; the scheduler keeps seeing max_new.
  q.sched_max_new = max_new;
  if (opts_.test_hooks.stop_after_tokens) q.hidden_stop = std::max(0, opts_.test_hooks.stop_after_tokens(q.rr.id));
  q.state.emplace(q.prompt, q.res.sampling, *tok_, std::move(stop_ids), q.hidden_stop > 0 ? std::min(max_new, q.hidden_stop) : max_new);
  if (q.rr.want_logprobs) q.state->set_top_logprobs(q.rr.top_logprobs);
  q.state->set_extractive(q.res.extractive);
  q.state->set_constraint(q.constraint);
  q.usage.prompt_tokens = prompt_len;
  q.kv.state = &*q.state;
  kv_host_->attach(sid, &q.kv);
  if (q.semantic_hit) return answer_from_cache(q);
  if (sp) return start_sequence_parallel(q);
  // Speculative decoding: n-gram drafts, for runs that do not roll back on their own (iterative).
  // The request's k, else the pipeline's, else the server's.
  const int spec_k = q.rr.speculative_k.value_or(
      q.res.spec && q.res.spec->speculative_k ? *q.res.spec->speculative_k : opts_.speculative.k);
  if (spec_k > 0 && !q.iter) {
    q.drafter.emplace(spec_k);
    q.usage.draft_method = q.model_drafter ? "draft" : "ngram";
  } else {
    q.model_drafter = nullptr;
  }
  if (q.iter) {
    q.iter->start(*q.state, *this);
    if (q.iter->failure()) return fail(sid, *q.iter->failure());
  }
  // A speculative prefill runs only while the batch has room; otherwise it waits for the search.
  bool spec_room = true;
  if (q.spec_prefill) {
    const SchedulerStats ss = sched_->stats();
    spec_room = ss.waiting == 0 && ss.running < sched_->options().max_running;
  }
  if (!q.kv.reuse.ready()) {
    loading_.push_back(sid);  // admitted to the scheduler when its KV is in host memory
    return;
  }
  schedule_run(q);
  if (q.spec_prefill && runs_.count(sid)) q.spec_prefill->on_scheduled(spec_room, *this);
}

namespace {

// What the length features read of a request: the question of a pipeline run, else the end of the
// last user message of a chat, else the end of the raw prompt (length_prompt_text).
std::string length_text(const RunRequest& rr) {
  if (!rr.query.empty()) return rr.query;
  for (auto it = rr.messages.rbegin(); it != rr.messages.rend(); ++it)
    if (it->role == "user") return length_prompt_text(it->content);
  return length_prompt_text(rr.prompt);
}

}  // namespace

void ExecutorImpl::schedule_run(Run& q) {
  SeqInfo si;
  si.id = q.sid;
  si.tenant = q.rr.tenant;
  si.pipeline = q.res.spec ? q.res.spec->name : "";
  si.prompt_tokens = q.state->prompt_len();
  si.max_new_tokens = q.sched_max_new > 0 ? q.sched_max_new : q.state->max_new_tokens();
  si.cached_tokens_hint = std::min(q.kv.reuse.hint_tokens, si.prompt_tokens);  // ordering (RAGCache)
  si.text = length_text(q.rr);
  si.oracle_output_tokens = q.hidden_stop;  // read only with SchedulerOptions::oracle_lengths (benchmarks)
  Status st = sched_->add(si);
  if (!st.ok()) fail(q.sid, st);
}

void ExecutorImpl::admit_loaded() {
  std::vector<uint64_t> ready;
  std::erase_if(loading_, [&](uint64_t sid) {
    auto it = runs_.find(sid);
    if (it == runs_.end()) return true;  // finished (cancelled) meanwhile
    if (!it->second->kv.reuse.ready()) return false;
    ready.push_back(sid);
    return true;
  });
  for (uint64_t sid : ready) schedule_run(*runs_.at(sid));
}

void ExecutorImpl::loop() {
  for (;;) {
    std::deque<std::unique_ptr<Run>> incoming;
    std::vector<std::string> cancels;
    std::deque<SearchDone> searches;
    std::deque<SpeculativePrefill::Candidate> candidates;
    std::deque<std::pair<uint64_t, SequenceParallelRoute::Outcome>> sp_back;
    bool loads = false, copies = false;
    if (!sched_->runnable()) store_->set_engine_busy(false);  // about to wait: copies may run
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return !inbox_.empty() || !cancels_.empty() || sched_->runnable() || load_done_ || copies_done_ ||
               !searches_done_.empty() || !candidates_.empty() || !sp_done_.empty() ||
               (stopping_ && pending_ == 0 && loading_.empty() && sched_->empty() && sp_runs_.empty());
      });
      incoming.swap(inbox_);
      searches.swap(searches_done_);
      candidates.swap(candidates_);
      cancels.swap(cancels_);
      sp_back.swap(sp_done_);
      loads = load_done_;
      load_done_ = false;
      copies = copies_done_;
      copies_done_ = false;
      if (stopping_ && pending_ == 0 && incoming.empty() && sched_->empty() && loading_.empty() && sp_runs_.empty())
        break;
    }
    for (auto& [sid, o] : sp_back) end_sequence_parallel(sid, std::move(o));
    for (auto& r : incoming) accept(std::move(r));
    for (const auto& name : cancels) {
      auto it = by_name_.find(name);
      if (it == by_name_.end()) {
        std::lock_guard<std::mutex> lk(mu_);
        if (live_names_.count(name)) early_cancels_.insert(name);
        continue;
      }
      bool on_route;
      {
        std::lock_guard<std::mutex> lk(mu_);  // a run on the route stops at its next step and comes back
        on_route = sp_runs_.count(it->second) > 0;
        if (on_route) sp_cancelled_.insert(it->second);
      }
      if (!on_route) finish(it->second, "cancelled");
    }
    // Background KV copies wait while model steps run (not while the scheduler is stalled).
    store_->set_engine_busy(!stalled_ && (sched_->runnable() || !incoming.empty()));
    for (auto& d : searches) {
      auto f = runs_.find(d.sid);
      if (f == runs_.end() || !f->second->iter) continue;  // finished or cancelled meanwhile
      Run& r = *f->second;
      r.iter->on_search_done(std::move(d), *r.state, *this);
    }
    for (auto& c : candidates) {
      auto f = runs_.find(c.sid);
      if (f == runs_.end() || !f->second->spec_prefill || !f->second->state) continue;  // finished meanwhile
      f->second->spec_prefill->on_candidate(std::move(c), *this);
    }
    if (copies) planner_->reclaim(0);  // frees finished copies' forks, evicts nothing
    if (loads || !loading_.empty()) admit_loaded();
    if (sched_->runnable()) step();
    publish_stats();
  }
  store_->set_engine_busy(false);
  publish_stats();
}

void ExecutorImpl::plan_drafts() {
  std::vector<Run*> decoding;
  for (auto& [sid, r] : runs_) {
    if (!r->drafter || !r->state || !r->state->finish_reason().empty() || r->state->generated() == 0) continue;
    if (!sched_->contains(sid) || sched_->kv_tokens(sid) != sched_->seq_len(sid) - 1) continue;  // not decoding next
    decoding.push_back(r.get());
  }
  if (decoding.empty() || static_cast<int>(decoding.size()) > opts_.speculative.max_decodes) {
    for (Run* r : decoding) r->draft.clear();
    return;
  }
  // Every run's proposal first, then the step budget (draft_budget.h) keeps the prefix of each
  // that is expected to pay for its rows at this batch size. N-gram drafts cost nothing to make and
  // are looked up first; a draft model's cost the budget weighs (DraftCandidate::draft_s), and it
  // drafts only the length the budget kept. A run of method draft drafts with its model only when
  // the gate (draft_model_pays) says the saving expected over its remaining tokens, less what the
  // model must be fed first (its prompt, the first time), beats the saving of the n-gram lookup's
  // draft; otherwise it takes the lookup's draft.
  const bool budget = !opts_.test_hooks.draft_budget_off;
  const bool alone = opts_.test_hooks.draft_model_alone;
  const int decodes = static_cast<int>(decoding.size());
  std::vector<DraftCandidate> candidates;
  candidates.reserve(decoding.size());
  for (Run* r : decoding) {
    const RunState& s = *r->state;
    const int len = r->drafter->take_length();
    // Never past max_tokens: the KV blocks of a run are counted for prompt + max_tokens.
    const int room = std::max(0, s.max_new_tokens() - s.generated() - 1);
    r->draft_from_answers = false;
    r->draft_from_model = false;
    const bool lookup = !r->model_drafter || (budget && !alone);
    r->draft = !lookup || len <= 0 ? std::vector<int32_t>{}
               : opts_.test_hooks.draft_source ? opts_.test_hooks.draft_source(r->rr.id, s.tokens(), s.generated(), len)
                                               : ngram_draft(s.tokens(), len);
    // Nothing to copy from the prompt: what this scope's earlier answers said after the same words.
    if (lookup && r->draft.empty() && len > 0 && !opts_.test_hooks.draft_source) {
      r->draft = output_ngrams_.draft(r->kv.reuse.scope, s.tokens(), len);
      r->draft_from_answers = !r->draft.empty();
    }
    if (r->draft.size() > static_cast<size_t>(std::max(0, len))) r->draft.resize(static_cast<size_t>(std::max(0, len)));
    if (r->draft.size() > static_cast<size_t>(room)) r->draft.resize(static_cast<size_t>(room));
    const DraftCandidate looked_up{static_cast<int>(r->draft.size()), r->drafts.alpha(recent_drafts_)};
    if (r->model_drafter) {
      DraftCandidate c{std::min(std::max(0, len), room), r->model_drafts.alpha(recent_model_drafts_),
                       r->model_drafter->token_seconds()};
      const double remaining = std::min<double>(room + 1, std::max(1.0, sched_->predicted_remaining(r->sid)));
      // The share of its tokens after a prefill that the model would draft (the lookup's rest).
      const double share = lookup ? recent_model_share_.share(kModelSharePrior, kModelSharePriorTokens) : 1.0;
      const double feed_s = r->model_drafter->feed_seconds(r->sid, s.tokens());
      r->draft_from_model = !budget || draft_model_pays(step_cost_, decodes, c, remaining, feed_s, looked_up, share);
      r->model_feed_pending = r->draft_from_model && feed_s > 0;
      if (!r->draft_from_model && c.available > 0) ++spec_draft_counts_.turned_down;
      if (r->draft_from_model || alone) {
        if (!r->draft_from_model) c.available = 0;
        r->draft.clear();
        r->draft_from_answers = false;
        candidates.push_back(c);
        continue;
      }
    }
    candidates.push_back(looked_up);
  }
  const std::vector<int> take = budget ? choose_draft_lengths(step_cost_, decodes, candidates) : std::vector<int>{};
  std::map<ModelDrafter*, std::vector<ModelDrafter::Request>> model_requests;
  for (size_t i = 0; i < decoding.size(); ++i) {
    Run* r = decoding[i];
    DraftHistory& history = r->draft_from_model ? r->model_drafts : r->drafts;
    const int n = budget ? history.settle_take(candidates[i].available, take[i], decodes) : candidates[i].available;
    (r->draft_from_model ? spec_draft_counts_ : spec_counts_).budget_skipped += static_cast<size_t>(candidates[i].available - n);
    if (r->model_drafter && (r->draft_from_model || opts_.test_hooks.draft_model_alone)) {
      if (n > 0) model_requests[r->model_drafter].push_back({r->sid, r->state->tokens(), n, &r->draft});
      if (n > 0 && r->model_feed_pending && r->model_fed_at < 0) r->model_fed_at = r->state->generated();
      continue;
    }
    r->draft.resize(static_cast<size_t>(n));
  }
  // Each draft model drafts its runs' tokens in batched steps of its own engine.
  for (auto& [drafter, reqs] : model_requests) drafter->draft(reqs);
  for (Run* r : decoding) sched_->set_draft(r->sid, static_cast<int>(r->draft.size()));
}

Status ExecutorImpl::choose_draft_model(Run& r) const {
  r.model_drafter = nullptr;
  if (r.res.speculative_method.value_or(opts_.speculative.method) != DraftMethod::kDraft) return Status::OK();
  const std::string& dir = !r.res.draft_model.empty() ? r.res.draft_model : opts_.speculative.draft_model;
  std::string loaded;
  for (const auto& [name, d] : draft_models_) loaded += (loaded.empty() ? "" : ", ") + ("'" + name + "'");
  if (loaded.empty()) loaded = "none";
  if (dir.empty())
    return Status::InvalidArgument("speculative_method \"draft\" needs a draft_model (loaded by this server: " + loaded + ")");
  auto it = draft_models_.find(dir);
  if (it == draft_models_.end())
    return Status::InvalidArgument("draft_model '" + dir.substr(0, 256) + "' is not loaded by this server (loaded: " + loaded +
                                   "; runtime.speculative_draft_model and pipelines' [generation] speculative.draft_model "
                                   "are loaded at start)");
  r.model_drafter = it->second.get();
  return Status::OK();
}

void ExecutorImpl::verify_draft(Run& r, const BatchItem& it, const engine::StepOutput& out, size_t item) {
  // Row j holds the distribution of the token after the fed token and drafts 1..j. The token drawn
  // from it (this run's sampler and RNG, as a step of its own would draw it) is taken; when it is
  // the next draft, the next row stands too. So the output is the one decoding without drafts
  // gives, greedy or sampled, and every draft accepted saved a step.
  const int k = it.draft;
  int accepted = 0;
  std::string reason;
  for (int j = 0; j <= k; ++j) {
    const std::span<const float> row = out.row(out.row_begin[item] + j);
    const engine::SampleResult pick = r.state->sample(row);
    reason = on_sampled(r, row, pick);
    if (!reason.empty() || j == k || pick.token != r.draft[static_cast<size_t>(j)]) break;
    ++accepted;
  }
  // A run that ended inside its draft (stop, max_tokens) says nothing about the tokens after.
  const int judged = reason.empty() ? k : accepted;
  r.drafter->observe(judged, accepted);
  constexpr double kDecay = 0.98;  // the server's acceptance follows its recent verifications
  DraftHistory& history = r.draft_from_model ? r.model_drafts : r.drafts;
  DraftHistory& server = r.draft_from_model ? recent_model_drafts_ : recent_drafts_;
  if (judged > 0) server.state[history.copying].observe(judged, accepted, kDecay);
  history.observe(judged, accepted);
  r.model_verified = r.model_verified || r.draft_from_model;
  if (r.draft_from_model && r.model_fed_at >= 0) r.model_made += 1 + accepted;
  ExecutorStats::Speculative& counts = r.draft_from_model ? spec_draft_counts_ : spec_counts_;
  counts.drafted += static_cast<uint64_t>(k);
  counts.accepted += static_cast<uint64_t>(accepted);
  if (r.draft_from_answers) {
    counts.answers_drafted += static_cast<uint64_t>(k);
    counts.answers_accepted += static_cast<uint64_t>(accepted);
  }
  ++counts.steps;
  // The draft model's KV of the rejected draft tokens goes, as the serving model's does.
  if (r.draft_from_model) r.model_drafter->settle(r.sid, r.state->tokens());
  r.usage.drafted_tokens += k;
  r.usage.accepted_tokens += accepted;
  ++r.usage.draft_steps;
  r.draft.clear();
  sched_->settle_draft(r.sid, k, accepted, *kv_host_);
  if (!reason.empty()) finish(r.sid, reason);
}

void ExecutorImpl::semantic_lookup(Run& r, const std::vector<ContextDoc>& ctx) {
  // Only where an earlier answer is the answer this run would give: greedy, unconstrained, no
  // logprobs, stop conditions and choice of configuration as the pipeline's.
  const engine::SamplingParams& sp = r.res.sampling;
  if (sp.temperature != 0.0f || sp.constraint || r.rr.want_logprobs || !sp.stop_token_ids.empty() || r.rr.sampling.stop ||
      r.res.adapt || !r.rr.tools.empty() || r.rr.query.empty() || !corpus_)
    return;
  auto emb = corpus_->embed_query(r.rr.query);
  if (!emb.ok() || emb->empty()) {
    log::pipelines()->warn("[{}] semantic cache: the question could not be embedded: {}", r.rr.id,
                           emb.ok() ? std::string("empty vector") : emb.status().to_string());
    return;
  }
  double norm = 0;
  for (float x : *emb) norm += static_cast<double>(x) * x;
  if (norm <= 0) return;
  for (float& x : *emb) x = static_cast<float>(x / std::sqrt(norm));
  std::vector<uint64_t> chunks;
  for (const ContextDoc& d : ctx) {
    chunks.push_back(d.source.chunk_id);
    if (std::find(r.semantic_docs.begin(), r.semantic_docs.end(), d.source.doc_id) == r.semantic_docs.end())
      r.semantic_docs.push_back(d.source.doc_id);
  }
  r.semantic_key = SemanticCache::key(r.rr.tenant, r.rr.cache_salt, r.res.spec->name, chunks);
  const PipelineSpec::SemanticCacheSpec& sc = *r.res.spec->semantic_cache;
  if (sc.grounding) {
    std::string passages;
    for (const ContextDoc& d : ctx) passages += tok_->decode(d.tokens, true) + "\n";
    std::vector<std::string> terms = retrieval::lexical_terms(r.rr.query);
    // Words common in what this tenant searches tell no two questions apart: left out.
    if (sc.grounding_max_share < 1.0) {
      // Without them (a corpus without a lexical index) every grounded term is compared: fewer
      // hits, never a false one.
      auto shares = corpus_->term_shares(terms, retrieval::ReadScope::tenant(r.rr.tenant));
      if (shares.ok()) {
        std::vector<std::string> kept;
        for (size_t i = 0; i < terms.size(); ++i)
          if ((*shares)[i] <= sc.grounding_max_share) kept.push_back(std::move(terms[i]));
        terms = std::move(kept);
      }
    }
    r.semantic_grounded = SemanticCache::grounded_terms(r.rr.query, terms, retrieval::lexical_terms(passages));
  }
  r.semantic_hit = semantic_->lookup(r.semantic_key, *emb, sc.threshold, sc.grounding ? &r.semantic_grounded : nullptr);
  // An earlier answer longer than this run may write is not this run's answer, nor is one cut at
  // another max_tokens than this run's.
  if (r.semantic_hit) {
    const int n = static_cast<int>(r.semantic_hit->tokens.size());
    if (n > r.res.sampling.max_tokens || (r.semantic_hit->finish == "length" && n != r.res.sampling.max_tokens)) r.semantic_hit.reset();
  }
  r.usage.semantic_cache = r.semantic_hit ? "hit" : "miss";
  if (r.semantic_hit) {
    r.usage.semantic_similarity = r.semantic_hit->similarity;
    r.usage.semantic_question = r.semantic_hit->question;
  }
  r.semantic_embedding = std::move(*emb);
}

void ExecutorImpl::answer_from_cache(Run& r) {
  RunState& s = *r.state;
  for (int32_t t : r.semantic_hit->tokens) {
    engine::SampleResult pick;
    pick.token = t;
    s.accept(pick);
    if (!s.finish_reason().empty()) break;
  }
  r.usage.completion_tokens = s.generated();
  r.t_first = r.t_last = Clock::now();
  const bool keep = s.release([&](const RunEvent& ev) { return r.sink(ev); });
  finish(r.sid, !keep ? std::string("cancelled") : s.finish_reason().empty() ? r.semantic_hit->finish : s.finish_reason());
}

void ExecutorImpl::step() {
  plan_drafts();
  StepPlan plan = sched_->schedule(*kv_host_);
  if (plan.items.empty()) {
    // Nothing can run (every request waits for memory held by cache or swapped KV): back off, with
    // the engine idle. Queued pool-to-DRAM copies hold forks of their nodes' pool blocks (even once
    // the pool evicted the nodes) and start only on an idle engine; with the engine counted busy
    // while a request waited for exactly those blocks, neither moved (a run swapped out and in on
    // every step for ever). Finished copies give their blocks back (reclaim at the next loop).
    if (!stalled_) store_->set_engine_busy(false);
    stalled_ = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return;
  }
  if (stalled_) {
    stalled_ = false;
    store_->set_engine_busy(true);
  }
  std::vector<engine::SeqStep> batch;
  batch.reserve(plan.items.size());
  // Approximate runs' repairs ride in their first prefill step (blend_step.h): the repair rows
  // (and first-seen documents) go first in the run's SeqStep, with explicit slots.
  RepairStepHook hook(model_->kv_pool());
  std::vector<std::vector<int32_t>> ids, slots;  // sized on the first repair: decode steps allocate nothing
  std::vector<size_t> repairs;  // batch indices that carry one
  const auto t0 = Clock::now();
  for (const BatchItem& it : plan.items) {
    Run& r = *runs_.at(it.id);
    RAGD_CHECK(r.kv.table.num_tokens() == it.start)
        << "request " << r.rr.id << ": KV holds " << r.kv.table.num_tokens() << " tokens, step starts at " << it.start;
    if (r.kv.reuse.pending && !(it.prefill && it.start == r.kv.reuse.pending->end)) repair_alone(r);
    engine::SeqStep s;
    s.table = &r.kv.table;
    s.tokens = std::span<const int32_t>(r.state->tokens().data() + it.start, it.n);
    s.logits = !it.sample ? engine::SeqStep::Logits::kNone
               : greedy_on_engine(r) ? engine::SeqStep::Logits::kGreedy
                                     : engine::SeqStep::Logits::kLast;
    if (it.draft > 0) {
      // The decode token, then the draft: every row's logits come back for verification.
      RAGD_CHECK(static_cast<int>(r.draft.size()) == it.draft) << "request " << r.rr.id << ": draft changed under its step";
      const size_t b = batch.size();
      if (ids.empty()) ids.resize(plan.items.size()), slots.resize(plan.items.size());
      ids[b].assign(1, r.state->tokens()[static_cast<size_t>(it.start)]);
      ids[b].insert(ids[b].end(), r.draft.begin(), r.draft.end());
      s.tokens = ids[b];
      s.logits = engine::SeqStep::Logits::kAll;
    }
    if (r.kv.reuse.pending) {
      const size_t b = batch.size();
      if (ids.empty()) ids.resize(plan.items.size()), slots.resize(plan.items.size());
      const PendingRepair& p = *r.kv.reuse.pending;
      for (int32_t row : p.rows) ids[b].push_back(r.state->tokens()[static_cast<size_t>(row)]), slots[b].push_back(row);
      for (int k = 0; k < it.n; ++k) ids[b].push_back(s.tokens[static_cast<size_t>(k)]), slots[b].push_back(it.start + k);
      s.tokens = ids[b];
      s.slots = slots[b];
      hook.add(static_cast<int>(b), r.kv.table, p);
      repairs.push_back(b);
    }
    batch.push_back(s);
  }
  engine::StepOutput out;
  Status st = hook.selects() ? model_->forward_with_hook(batch, hook, &out) : model_->forward(batch, &out);
  if (!st.ok()) {
    log::pipelines()->error("forward failed: {}", st.to_string());
    for (const BatchItem& it : plan.items) fail(it.id, st);
    return;
  }
  const auto t1 = Clock::now();
  if (!repairs.empty()) {
    // Each repair's share of the step's time: its row-layers over the step's.
    const int layers = model_->config().num_hidden_layers;
    long total = 0;
    for (const BatchItem& it : plan.items) total += static_cast<long>(it.n) * layers;
    std::vector<RepairOutcome> outcomes;
    for (size_t b : repairs) total += outcomes.emplace_back(hook.outcome(static_cast<int>(b), layers)).row_layers;
    for (size_t i = 0; i < repairs.size(); ++i) {
      Run& r = *runs_.at(plan.items[repairs[i]].id);
      planner_->finish_repair(r.kv.reuse, outcomes[i], ms_between(t0, t1) * outcomes[i].row_layers / std::max(1L, total));
      r.kv.recomputed += outcomes[i].repaired;
    }
  }
  sched_->commit(plan);
  const std::vector<std::optional<engine::SampleResult>> picks = sample_rows(plan, out);
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const BatchItem& it = plan.items[i];
    auto f = runs_.find(it.id);
    if (f == runs_.end()) continue;
    Run& r = *f->second;
    if (it.prefill && r.t_first == Clock::time_point{}) r.timings.prefill_ms += ms_between(t0, t1);
    if (it.draft > 0) {
      verify_draft(r, it, out, i);
      continue;
    }
    const bool row = it.sample && out.picks[i].token < 0;  // a pick came back instead of the row
    after_feed(r, row ? out.row(out.row_begin[i]) : std::span<const float>(), it.sample, picks[i]);
  }
  // Every step (forward, sampling, verification) teaches the draft budget what a row costs on this
  // machine and model (draft_budget.h); prefill chunks give it the rows decodes alone seldom span.
  int logit_rows = 0;
  for (const BatchItem& it : plan.items) logit_rows += it.sample ? 1 + it.draft : 0;
  step_cost_.observe(plan.tokens - logit_rows, logit_rows, std::chrono::duration<double>(Clock::now() - t0).count());
}

void ExecutorImpl::repair_alone(Run& r) {
  // A pending repair whose run's next step is not its first prefill (not expected): run it as a
  // step of its own, so that no placeholder slot is ever attended unwritten.
  const PendingRepair& p = *r.kv.reuse.pending;
  std::vector<int32_t> ids;
  for (int32_t row : p.rows) ids.push_back(r.state->tokens()[static_cast<size_t>(row)]);
  RepairStepHook hook(model_->kv_pool());
  engine::SeqStep s;
  s.table = &r.kv.table;
  s.tokens = ids;
  s.slots = p.rows;
  s.logits = engine::SeqStep::Logits::kNone;
  hook.add(0, r.kv.table, p);
  engine::StepOutput out;
  const auto t0 = Clock::now();
  Status st = hook.selects() ? model_->forward_with_hook(std::span<engine::SeqStep>(&s, 1), hook, &out)
                             : model_->forward(std::span<engine::SeqStep>(&s, 1), &out);
  if (!st.ok()) log::pipelines()->error("repair step of {} failed: {}", r.rr.id, st.to_string());
  const RepairOutcome o = hook.outcome(0, model_->config().num_hidden_layers);
  planner_->finish_repair(r.kv.reuse, o, ms_between(t0, Clock::now()));
  r.kv.recomputed += o.repaired;
}

bool ExecutorImpl::greedy_on_engine(const Run& r) const {
  // A prompt held for a speculative search keeps its logits for later.
  return r.state->greedy_pick_suffices() && !(r.spec_prefill && r.spec_prefill->holds_first_token());
}

std::vector<std::optional<engine::SampleResult>> ExecutorImpl::sample_rows(const StepPlan& plan,
                                                                           const engine::StepOutput& out) {
  // The rows whose token is drawn now (not a prompt held for a speculative search: its logits wait).
  std::vector<std::optional<engine::SampleResult>> picks(plan.items.size());
  std::vector<std::pair<size_t, RunState*>> rows;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const BatchItem& it = plan.items[i];
    auto f = runs_.find(it.id);
    if (!it.sample || it.draft > 0 || f == runs_.end()) continue;  // drafts are verified row by row
    if (out.picks[i].token >= 0) {  // the engine's greedy pick
      picks[i] = out.picks[i];
      continue;
    }
    Run& r = *f->second;
    if (r.spec_prefill && r.spec_prefill->holds_first_token()) continue;
    rows.emplace_back(i, &*r.state);
  }
  // Each run's sampler, RNG and history are its own, so the rows are drawn on all cores when they
  // are worth it (a large vocabulary: ~80 µs a row at 128 k); the outputs do not depend on it.
  const int n = static_cast<int>(rows.size());
  const bool parallel =
      n > 1 && static_cast<size_t>(n) * static_cast<size_t>(out.vocab_size) >= opts_.test_hooks.parallel_sample_min_values;
  // On the kernels' team (kernels/threads.h), as the step's kernels just were: its workers are
  // still spinning, and an OpenMP team here would compete with them for the cores.
  kernels::parallel_tasks(n, parallel, [&](int k) {
    const size_t i = rows[k].first;
    picks[i] = rows[k].second->sample(out.row(out.row_begin[i]));
  });
  return picks;
}

void ExecutorImpl::after_feed(Run& r, std::span<const float> logits, bool sampled,
                              const std::optional<engine::SampleResult>& pick) {
  if (sampled && r.spec_prefill && r.spec_prefill->holds_first_token())
    return r.spec_prefill->keep_first_token(logits, *this);
  // The token goes to the client first; then the prompt's new KV is published (copies to DRAM
  // and SSD take time that should not delay the first token); then a finished run ends.
  std::string reason = sampled ? on_sampled(r, logits, pick) : std::string();
  if (!r.kv.reuse.published && r.kv.table.num_tokens() >= r.state->prompt_len()) {
    const auto tp = Clock::now();
    if (opts_.test_hooks.before_publish) opts_.test_hooks.before_publish(r.rr.id);
    planner_->publish(r.kv.reuse, r.kv.table, r.prompt);
    r.timings.publish_ms = ms_between(tp, Clock::now());
  }
  if (r.iter && sampled) {
    reason = r.iter->after_token(*r.state, reason, *this);
    if (r.iter->failure()) return fail(r.sid, *r.iter->failure());
  }
  if (!reason.empty()) finish(r.sid, reason);
}

std::string ExecutorImpl::on_sampled(Run& r, std::span<const float> logits,
                                     const std::optional<engine::SampleResult>& pick) {
  const auto now = Clock::now();
  RunState& s = *r.state;
  if (pick) {
    s.accept(*pick);
  } else {
    s.advance(logits);
  }
  r.usage.completion_tokens = s.generated();
  if (s.generated() == 1) {
    if (r.usage.adapt && r.t_first == Clock::time_point{}) adapt_first_token(r, now);  // once, not after a rollback
    r.t_first = now;
  }
  r.t_last = now;
  const bool keep = s.release([&](const RunEvent& ev) { return r.sink(ev); });
  if (!s.finish_reason().empty()) return s.finish_reason();
  return keep ? std::string() : std::string("cancelled");
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

// SpeculativePrefill::RunLoop: the unit names runs that are in runs_ (it is called for them only).
void ExecutorImpl::hold(uint64_t sid, bool on) { sched_->hold(sid, on); }

Status ExecutorImpl::rebuild_prompt(uint64_t sid, const std::vector<ContextDoc>& docs) {
  return rebuild_prompt(*runs_.at(sid), docs);
}

bool ExecutorImpl::release_sources(uint64_t sid, std::vector<Source> sources) {
  Run& r = *runs_.at(sid);
  RunEvent ev;
  ev.kind = RunEvent::Kind::kSources;
  ev.sources = std::move(sources);
  r.state->push_event(std::move(ev));
  return r.state->release([&](const RunEvent& e) { return r.sink(e); });
}

void ExecutorImpl::feed_first_token(uint64_t sid, std::span<const float> logits) {
  after_feed(*runs_.at(sid), logits, true);
}

void ExecutorImpl::drop_run(Run& r) {
  kv_host_->detach(r.sid);
  if (r.model_drafter) {
    r.model_drafter->forget(r.sid);
    if (!r.model_verified) recent_model_drafts_.fade(kModelIdleFade);
    if (r.model_fed_at >= 0 && r.state)
      recent_model_share_.observe(r.model_made, std::max(1, r.state->generated() - r.model_fed_at), kModelShareDecay);
    else
      recent_model_share_.fade(kModelShareDecay);
  }
  by_name_.erase(r.rr.id);
  loading_.erase(std::remove(loading_.begin(), loading_.end(), r.sid), loading_.end());
  forget_name(r);
  runs_.erase(r.sid);
}

void ExecutorImpl::finish(uint64_t sid, const std::string& reason) {
  auto it = runs_.find(sid);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  const auto now = Clock::now();
  RunEvent ev;
  ev.kind = RunEvent::Kind::kDone;
  ev.finish_reason = reason;
  r.usage.reused = r.kv.reused.from;
  r.usage.recomputed_tokens = r.kv.recomputed;
  const ReusePlan& plan = r.kv.reuse;
  r.usage.reuse = reuse_mode_name(plan.mode);
  r.usage.approximate = plan.approximate;
  r.usage.blended_tokens = plan.blended.placed;
  r.usage.repaired_tokens = plan.blended.repaired;
  r.usage.recompute_ratio = reuse_strategy_rules(plan.mode).usage_recompute_ratio(plan.blend);
  r.usage.reuse_note = plan.note.empty() ? plan.auto_note : plan.note;  // a fallback's reason, or auto's choice
  r.usage.recompute_ratio_floor = plan.blended.ratio_floor;
  r.timings.blend_chunk_ms = plan.blended.chunk_ms;
  r.timings.blend_place_ms = plan.blended.place_ms;
  r.timings.blend_repair_ms = plan.blended.repair_ms;
  if (r.drafter && r.state && r.state->generated() > 0) output_ngrams_.add(r.kv.reuse.scope, r.state->generated_tokens());
  // A [semantic_cache] pipeline's answer (complete, or cut at max_tokens) is kept for later questions.
  if (!r.semantic_key.empty() && !r.semantic_hit && (reason == "stop" || reason == "length") && r.state && r.state->generated() > 0) {
    const auto gen = r.state->generated_tokens();
    semantic_->insert(r.semantic_key, r.semantic_embedding, r.rr.query, std::vector<int32_t>(gen.begin(), gen.end()), reason,
                      r.semantic_docs, r.semantic_grounded);
  }
  if (length_log_ && !r.semantic_hit && (reason == "stop" || reason == "length") && r.state) {
    LengthSample ls;
    ls.features = {r.res.spec ? r.res.spec->name : "", length_text(r.rr), r.state->prompt_len(),
                   r.sched_max_new > 0 ? r.sched_max_new : r.state->max_new_tokens()};
    ls.output_tokens = r.state->generated();
    ls.finish_reason = reason;
    length_log_->append(ls);
  }
  if (r.iter) {
    r.iter->on_finish(*this, r.usage, r.timings);
  } else if (r.spec_prefill) {
    r.spec_prefill->on_finish(*this, r.usage, r.timings);
  } else {
    r.timings.search_wait_ms = r.timings.retrieval_ms;
  }
  r.timings.kv_load_ms += r.kv.install_ms;
  r.timings.admit_ms = r.kv.install_ms;
  ev.usage = r.usage;
  Timings& t = r.timings;
  t.total_ms = ms_between(r.t_submit, now);
  if (r.t_first != Clock::time_point{}) {
    t.ttft_ms = ms_between(r.t_submit, r.t_first);
    if (r.usage.completion_tokens > 1) t.tpot_ms = ms_between(r.t_first, r.t_last) / (r.usage.completion_tokens - 1);
  }
  if (r.kv.admitted) t.queue_ms = ms_between(r.t_ready, r.kv.t_admit);
  ev.timings = t;
  if (sched_->contains(sid)) {
    if (reason == "cancelled") sched_->cancel(sid, *kv_host_); else sched_->finish(sid, *kv_host_);
  } else {
    kv_host_->release(sid);
  }
  {
    std::lock_guard<std::mutex> lk(stats_mu_);  // before the done event: a client may read stats on it
    const Usage& u = r.usage;
    if (u.reused_tokens() > 0) stats_.runs_with_reuse += 1;
    stats_.reused += u.reused;
    stats_.recomputed += u.recomputed_tokens;
    stats_.approximate_runs += u.approximate ? 1 : 0;
    stats_.blended_tokens += u.blended_tokens;
    stats_.repaired_tokens += u.repaired_tokens;
    stats_.blend_fallbacks += r.kv.reuse.note.empty() ? 0 : 1;
  }
  forget_name(r);
  emit(r, ev);
  drop_run(r);
}

void ExecutorImpl::forget_name(const Run& r) {
  std::lock_guard<std::mutex> lk(mu_);
  live_names_.erase(r.rr.id);
  adapt_work_.erase(r.sid);
}

void ExecutorImpl::fail(uint64_t sid, const Status& st) {
  auto it = runs_.find(sid);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  // The message may quote request values: bounded like every echo (common/echo.h).
  log::pipelines()->warn("[{}] run failed: {}", r.rr.id, clip_input(st.to_string(), kEchoMessageMaxBytes));
  if (sched_->contains(sid)) sched_->cancel(sid, *kv_host_); else kv_host_->release(sid);
  RunEvent ev;
  ev.kind = RunEvent::Kind::kError;
  ev.error = st;
  forget_name(r);
  emit(r, ev);
  drop_run(r);
}

}  // namespace ragd::pipelines
