#include "executor_impl.h"
#include "ragd/common/json_writer.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "ragd/common/check.h"
#include "ragd/common/log.h"
#if RAGD_HAVE_RETRIEVAL
#include "ragd/retrieval/corpus.h"
#endif

namespace ragd::pipelines {

namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

}  // namespace

Result<std::unique_ptr<ExecutorImpl>> ExecutorImpl::create(const RuntimeOptions& opts, Deps deps) {
  if (!deps.model) return Status::InvalidArgument("executor: no model");
  if (!deps.tokenizer) return Status::InvalidArgument("executor: no tokenizer");
  RAGD_ASSIGN_OR_RETURN(SchedPolicy policy, parse_sched_policy(opts.scheduler));
  RAGD_ASSIGN_OR_RETURN(PreemptMode pm, parse_preempt_mode(opts.preemption));
  if (opts.max_batch_tokens <= 0) return Status::InvalidArgument("executor: max_batch_tokens must be positive");
  if (opts.max_running <= 0) return Status::InvalidArgument("executor: max_running must be positive");
  if (opts.max_queue <= 0) return Status::InvalidArgument("executor: max_queue must be positive");
  std::unique_ptr<ExecutorImpl> ex(new ExecutorImpl(opts, std::move(deps)));
  SchedulerOptions so;
  so.policy = policy;
  so.preemption = pm;
  so.max_batch_tokens = opts.max_batch_tokens;
  so.max_running = opts.max_running;
  ex->sched_ = std::make_unique<Scheduler>(so);
  ex->publish_stats();
  ex->thread_ = std::thread([p = ex.get()] { p->loop(); });
  return ex;
}

ExecutorImpl::ExecutorImpl(const RuntimeOptions& opts, Deps deps)
    : opts_(opts),
      model_(std::move(deps.model)),
      tok_(std::move(deps.tokenizer)),
      corpus_(std::move(deps.corpus)),
      tiers_(std::move(deps.tiers)),
      specs_(std::move(deps.pipelines)),
      model_name_(std::move(deps.model_name)) {
  prompts_ = std::make_unique<PromptBuilder>(*tok_, model_->config());
  cache_ = std::make_unique<HbmCache>(model_->kv_pool());
  const auto& l = model_->kv_pool().layout();
  Hasher128 h;
  h.str("ragd-hbm-path-v1").h128(model_->fingerprint()).u64(l.num_layers).u64(l.num_kv_heads).u64(l.head_dim);
  scope_ = h.digest();
  retrieval_pool_ = std::make_unique<ThreadPool>(std::max(1, opts.retrieval_threads), opts.max_queue, "retrieval");
}

ExecutorImpl::~ExecutorImpl() { stop(); }

void ExecutorImpl::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  stopping_ = true;
  retrieval_pool_->stop();  // runs queued preparations; they hand over to the inbox
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The scheduler thread has exited: release cached KV before the pool goes away.
  cache_->clear();
  if (tiers_) tiers_->flush();
}

std::vector<PipelineInfo> ExecutorImpl::pipelines() const {
  std::vector<PipelineInfo> v;
  for (const auto& s : specs_) v.push_back(s.info());
  return v;
}

Status ExecutorImpl::submit(RunRequest req, EventSink sink) {
  if (stopping_) return Status::Unavailable("executor is stopping");
  if (!sink) return Status::InvalidArgument("submit: no event sink");
  auto r = std::make_unique<Req>();
  if (!req.pipeline.empty()) {
    auto it = std::find_if(specs_.begin(), specs_.end(), [&](const PipelineSpec& s) { return s.name == req.pipeline; });
    if (it == specs_.end()) return Status::NotFound("pipeline '" + req.pipeline + "' not found");
    r->spec = &*it;
    if (req.query.empty()) return Status::InvalidArgument("query must not be empty");
    if (req.top_k > 64) return Status::InvalidArgument("top_k must be at most 64, got " + std::to_string(req.top_k));
    // Pipeline generation defaults apply where the request left the built-in default.
    const engine::SamplingParams d;
    if (req.sampling.max_tokens == d.max_tokens) req.sampling.max_tokens = it->max_tokens;
    if (req.sampling.temperature == d.temperature) req.sampling.temperature = it->temperature;
    if (req.sampling.top_p == d.top_p) req.sampling.top_p = it->top_p;
    if (req.sampling.top_k == d.top_k) req.sampling.top_k = it->sampling_top_k;
    if (req.sampling.seed == d.seed) req.sampling.seed = it->seed;
    if (req.sampling.stop.empty()) req.sampling.stop = it->stop;
    r->reuse = req.reuse.value_or(it->reuse);
  } else {
    if (req.messages.empty() && req.prompt.empty()) return Status::InvalidArgument("one of messages or prompt is required");
    r->reuse = req.reuse.value_or(ReuseMode::kPrefix);
    if (r->reuse == ReuseMode::kKnowledgeTree) r->reuse = ReuseMode::kPrefix;  // no documents to key
  }
  RAGD_RETURN_IF_ERROR(req.sampling.validate());
  if (req.sampling.max_tokens <= 0) return Status::InvalidArgument("max_tokens must be positive");
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
  r->rr = std::move(req);
  r->sink = std::move(sink);
  r->t_submit = Clock::now();
  auto* raw = r.release();
  if (!retrieval_pool_->submit([this, raw] { prepare(std::unique_ptr<Req>(raw)); })) {
    std::unique_ptr<Req> back(raw);
    std::lock_guard<std::mutex> lk(mu_);
    --pending_;
    live_names_.erase(back->rr.id);
    return Status::ResourceExhausted("executor retrieval queue is full");
  }
  return Status::OK();
}

void ExecutorImpl::cancel(const std::string& request_id) {
  std::lock_guard<std::mutex> lk(mu_);
  cancels_.push_back(request_id);
  cv_.notify_all();
}

void ExecutorImpl::prepare(std::unique_ptr<Req> r) {
  const auto t0 = Clock::now();
  const RunRequest& q = r->rr;
  if (r->spec) {
    const int k = q.top_k >= 0 ? q.top_k : r->spec->top_k;
    std::vector<std::vector<int32_t>> docs;
    if (k > 0) {
#if RAGD_HAVE_RETRIEVAL
      if (!corpus_) {
        r->error = "pipeline '" + r->spec->name + "' retrieves documents but the runtime has no corpus (data_dir)";
      } else {
        retrieval::SearchParams sp;
        sp.nprobe = r->spec->nprobe;
        // The request's tenant sees its own documents and the shared ones, filtered inside the search.
        auto hits = corpus_->search(q.query, k, sp, q.tenant);
        if (!hits.ok()) {
          r->error = "retrieval failed: " + hits.status().to_string();
        } else {
          RunEvent ev;
          ev.kind = RunEvent::Kind::kSources;
          for (const auto& h : *hits) {
            Source s;
            s.doc_id = h.chunk.doc_id;
            s.chunk_id = h.chunk.id;
            s.score = h.score;
            s.snippet = h.chunk.text.substr(0, 240);
            ev.sources.push_back(std::move(s));
          }
          // Stable document order (by chunk id): the same set of chunks gives the same path.
          std::vector<const retrieval::Hit*> sorted;
          for (const auto& h : *hits) sorted.push_back(&h);
          std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->chunk.id < b->chunk.id; });
          for (const auto* h : sorted)
            docs.push_back(h->chunk.token_ids.empty() ? tok_->encode(h->chunk.text, false, false) : h->chunk.token_ids);
          if (!r->sink(ev)) r->error = "cancelled";
        }
      }
#else
      r->error = "this build has no retrieval module";
#endif
    } else {
      RunEvent ev;
      ev.kind = RunEvent::Kind::kSources;
      if (!r->sink(ev)) r->error = "cancelled";
    }
    r->timings.retrieval_ms = ms_between(t0, Clock::now());
    if (r->error.empty()) {
      PromptSegments p = prompts_->build_rag(*r->spec, docs, q.query);
      r->tokens = p.flat();
      r->path.assign(p.segs.begin(), p.segs.end() - 1);
      int end = 0;
      Hash128 parent = scope_;
      for (const auto& s : r->path) {
        end += static_cast<int>(s.size());
        r->path_ends.push_back(end);
        Hasher128 h;
        h.h128(parent).i32s(s);
        parent = h.digest();
        r->path_keys.push_back(parent);
      }
      if (tiers_ && r->reuse == ReuseMode::kKnowledgeTree) {
        const auto tl = Clock::now();
        r->preloaded = tiers_->load(r->path);
        r->timings.kv_load_ms = ms_between(tl, Clock::now());
      }
    }
  } else if (!q.messages.empty()) {
    r->tokens = prompts_->build_chat(q.messages);
  } else {
    r->tokens = prompts_->build_raw(q.prompt);
  }
  r->prompt_len = static_cast<int>(r->tokens.size());
  r->t_ready = Clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  --pending_;
  inbox_.push_back(std::move(r));
  cv_.notify_all();
}

bool ExecutorImpl::emit(Req& r, const RunEvent& ev) {
  try {
    return r.sink(ev);
  } catch (...) {
    log::pipelines()->error("[{}] event sink threw; cancelling the run", r.rr.id);
    return false;
  }
}

void ExecutorImpl::accept(std::unique_ptr<Req> r) {
  const uint64_t sid = r->sid;
  Req& q = *r;
  reqs_[sid] = std::move(r);
  by_name_[q.rr.id] = sid;
  if (early_cancels_.erase(q.rr.id)) q.error = "cancelled";
  if (!q.error.empty()) {
    if (q.error == "cancelled") return finish(sid, "cancelled");
    return fail(sid, Status::Unavailable(q.error));
  }
  const auto& cfg = model_->config();
  if (q.prompt_len == 0) return fail(sid, Status::InvalidArgument("prompt is empty after tokenization"));
  if (cfg.max_position_embeddings > 0 && q.prompt_len >= cfg.max_position_embeddings)
    return fail(sid, Status::InvalidArgument("prompt of " + std::to_string(q.prompt_len) +
                                             " tokens does not fit the model context of " +
                                             std::to_string(cfg.max_position_embeddings)));
  q.max_new = q.rr.sampling.max_tokens;
  if (cfg.max_position_embeddings > 0) q.max_new = std::min(q.max_new, cfg.max_position_embeddings - q.prompt_len);
  const auto& pool = model_->kv_pool();
  const int bs = pool.layout().block_size;
  const size_t need = static_cast<size_t>((q.prompt_len + q.max_new + bs - 1) / bs) + 1;
  if (need > pool.num_blocks())
    return fail(sid, Status::ResourceExhausted("prompt of " + std::to_string(q.prompt_len) + " tokens + max_tokens " +
                                               std::to_string(q.max_new) + " needs " + std::to_string(need) +
                                               " KV blocks; the pool has " + std::to_string(pool.num_blocks()) +
                                               " (raise kv_pool_bytes)"));
  q.sampler = std::make_unique<engine::Sampler>(q.rr.sampling);
  q.decoder = std::make_unique<engine::StreamDecoder>(*tok_);
  if (!q.rr.sampling.ignore_eos) {
    q.stop_ids = tok_->eos_ids();
    for (int e : cfg.eos_token_ids) q.stop_ids.push_back(e);
  }
  for (int32_t t : q.rr.sampling.stop_token_ids) q.stop_ids.push_back(t);
  q.usage.prompt_tokens = q.prompt_len;
  SeqInfo si;
  si.id = sid;
  si.tenant = q.rr.tenant;
  si.pipeline = q.spec ? q.spec->name : "";
  si.prompt_tokens = q.prompt_len;
  si.max_new_tokens = q.max_new;
  // Cached-token hint for ordering (RAGCache): what the HBM cache holds right now.
  if (q.reuse == ReuseMode::kKnowledgeTree && !q.path_keys.empty()) {
    int d = 0;
    while (d < static_cast<int>(q.path_keys.size()) && cache_->contains_path(q.path_keys[d])) ++d;
    si.cached_tokens_hint = d > 0 ? q.path_ends[d - 1] : 0;
  }
  Status st = sched_->add(si);
  if (!st.ok()) fail(sid, st);
}

void ExecutorImpl::loop() {
  for (;;) {
    std::deque<std::unique_ptr<Req>> incoming;
    std::vector<std::string> cancels;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] {
        return !inbox_.empty() || !cancels_.empty() || !sched_->empty() || (stopping_ && pending_ == 0);
      });
      incoming.swap(inbox_);
      cancels.swap(cancels_);
      if (stopping_ && pending_ == 0 && incoming.empty() && sched_->empty()) break;
    }
    for (auto& r : incoming) accept(std::move(r));
    for (const auto& name : cancels) {
      auto it = by_name_.find(name);
      if (it != by_name_.end()) {
        finish(it->second, "cancelled");
      } else {
        std::lock_guard<std::mutex> lk(mu_);
        if (live_names_.count(name)) early_cancels_.insert(name);
      }
    }
    if (!sched_->empty()) step();
    publish_stats();
  }
  publish_stats();
}

void ExecutorImpl::step() {
  StepPlan plan = sched_->schedule(*this);
  if (plan.items.empty()) {
    // Nothing can run (every request waits for memory held by cache or swapped KV): back off.
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return;
  }
  std::vector<engine::SeqStep> batch;
  batch.reserve(plan.items.size());
  const auto t0 = Clock::now();
  for (const BatchItem& it : plan.items) {
    Req& r = *reqs_.at(it.id);
    RAGD_CHECK(r.table.num_tokens() == it.start)
        << "request " << r.rr.id << ": KV holds " << r.table.num_tokens() << " tokens, step starts at " << it.start;
    engine::SeqStep s;
    s.table = &r.table;
    s.tokens = std::span<const int32_t>(r.tokens.data() + it.start, it.n);
    s.logits = it.sample ? engine::SeqStep::Logits::kLast : engine::SeqStep::Logits::kNone;
    batch.push_back(s);
  }
  engine::StepOutput out;
  Status st = model_->forward(batch, &out);
  if (!st.ok()) {
    log::pipelines()->error("forward failed: {}", st.to_string());
    for (const BatchItem& it : plan.items) fail(it.id, st);
    return;
  }
  const auto t1 = Clock::now();
  sched_->commit(plan);
  std::vector<uint64_t> sampled;
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const BatchItem& it = plan.items[i];
    auto f = reqs_.find(it.id);
    if (f == reqs_.end()) continue;
    Req& r = *f->second;
    if (it.prefill && r.t_first == Clock::time_point{}) r.timings.prefill_ms += ms_between(t0, t1);
    if (r.table.num_tokens() >= r.prompt_len && !r.inserted) insert_reusable(r);
    if (!it.sample) continue;
    const std::span<const float> logits = out.row(out.row_begin[i]);
    const engine::SampleResult s = r.sampler->sample(logits, r.tokens);
    on_sampled(r, s);
  }
}

void ExecutorImpl::on_sampled(Req& r, const engine::SampleResult& s) {
  const auto now = Clock::now();
  r.tokens.push_back(s.token);
  const int index = r.usage.completion_tokens++;
  if (index == 0) r.t_first = now;
  r.t_last = now;
  std::string reason;
  const bool is_stop_id = std::find(r.stop_ids.begin(), r.stop_ids.end(), s.token) != r.stop_ids.end();
  std::string text = is_stop_id ? std::string() : r.decoder->push(s.token);
  if (is_stop_id) reason = "stop";
  if (!text.empty() && !r.rr.sampling.stop.empty()) {
    const size_t before = r.out_text.size();
    r.out_text += text;
    for (const auto& stop : r.rr.sampling.stop) {
      if (stop.empty()) continue;
      const size_t from = before >= stop.size() ? before - stop.size() + 1 : 0;
      const size_t pos = r.out_text.find(stop, from);
      if (pos != std::string::npos) {
        text = pos > before ? r.out_text.substr(before, pos - before) : std::string();
        r.out_text.resize(pos);
        reason = "stop";
        break;
      }
    }
  }
  if (reason.empty() && r.usage.completion_tokens >= r.max_new) reason = "length";
  RunEvent ev;
  ev.kind = RunEvent::Kind::kToken;
  ev.index = index;
  ev.token_id = s.token;
  ev.text = std::move(text);
  ev.logprob = s.logprob;
  const bool keep = emit(r, ev);
  if (!reason.empty()) finish(r.sid, reason);
  else if (!keep) finish(r.sid, "cancelled");
}

void ExecutorImpl::insert_reusable(Req& r) {
  r.inserted = true;
  if (r.reuse == ReuseMode::kPrefix && opts_.hbm_cache) {
    cache_->insert_prefix(std::span<const int32_t>(r.tokens.data(), r.prompt_len), r.table);
    return;
  }
  if (r.reuse != ReuseMode::kKnowledgeTree) return;
  const auto& pool = model_->kv_pool();
  const auto& l = pool.layout();
  for (size_t i = 0; i < r.path_keys.size() && opts_.hbm_cache; ++i) {
    if (!cache_->contains_path(r.path_keys[i]))
      cache_->insert_path(r.path_keys[i], i ? r.path_keys[i - 1] : scope_, i == 0, r.table, r.path_ends[i]);
  }
  if (!tiers_) return;
  // Offer every node to the lower tiers (they skip the ones they hold).
  const int have = tiers_->match(r.path);
  std::vector<float> k, v;
  for (size_t i = static_cast<size_t>(have); i < r.path.size(); ++i) {
    const int start = i ? r.path_ends[i - 1] : 0;
    const int n = r.path_ends[i] - start;
    if (n <= 0) continue;
    const size_t per = static_cast<size_t>(n) * l.token_floats();
    k.resize(per * l.num_layers);
    v.resize(per * l.num_layers);
    for (int layer = 0; layer < l.num_layers; ++layer)
      r.table.read(pool, layer, start, n, k.data() + layer * per, v.data() + layer * per);
    tiers_->insert(r.path, static_cast<int>(i), start, n, k.data(), v.data());
  }
}

void ExecutorImpl::finish(uint64_t sid, const std::string& reason) {
  auto it = reqs_.find(sid);
  if (it == reqs_.end()) return;
  Req& r = *it->second;
  const auto now = Clock::now();
  RunEvent ev;
  ev.kind = RunEvent::Kind::kDone;
  ev.finish_reason = reason;
  ev.usage = r.usage;
  Timings& t = r.timings;
  t.total_ms = ms_between(r.t_submit, now);
  if (r.t_first != Clock::time_point{}) {
    t.ttft_ms = ms_between(r.t_submit, r.t_first);
    if (r.usage.completion_tokens > 1) t.tpot_ms = ms_between(r.t_first, r.t_last) / (r.usage.completion_tokens - 1);
  }
  if (r.admitted_once) t.queue_ms = ms_between(r.t_ready, r.t_admit);
  ev.timings = t;
  if (sched_->contains(sid)) {
    if (reason == "cancelled") sched_->cancel(sid, *this); else sched_->finish(sid, *this);
  } else {
    release(sid);
  }
  emit(r, ev);
  by_name_.erase(r.rr.id);
  {
    std::lock_guard<std::mutex> lk(mu_);
    live_names_.erase(r.rr.id);
  }
  reqs_.erase(it);
}

void ExecutorImpl::fail(uint64_t sid, const Status& st) {
  auto it = reqs_.find(sid);
  if (it == reqs_.end()) return;
  Req& r = *it->second;
  log::pipelines()->warn("[{}] run failed: {}", r.rr.id, st.to_string());
  if (sched_->contains(sid)) sched_->cancel(sid, *this); else release(sid);
  RunEvent ev;
  ev.kind = RunEvent::Kind::kError;
  ev.error = st;
  emit(r, ev);
  by_name_.erase(r.rr.id);
  {
    std::lock_guard<std::mutex> lk(mu_);
    live_names_.erase(r.rr.id);
  }
  reqs_.erase(it);
}

// ---- KvHost ------------------------------------------------------------------------------------

bool ExecutorImpl::ensure_free(int blocks) {
  auto& pool = model_->kv_pool();
  while (static_cast<int>(pool.free_blocks()) < blocks)
    if (!cache_->evict_one()) return false;
  return true;
}

int ExecutorImpl::blocks_needed(uint64_t id, int n) const {
  return reqs_.at(id)->table.blocks_needed(model_->kv_pool(), n);
}

int ExecutorImpl::admit(uint64_t id, int keep_free) {
  Req& r = *reqs_.at(id);
  auto& pool = model_->kv_pool();
  const auto t0 = Clock::now();
  const int len = static_cast<int>(r.tokens.size());
  int present = 0;
  Usage reuse;
  if (r.reuse == ReuseMode::kKnowledgeTree && !r.path_keys.empty()) {
    const engine::BlockTable* t = nullptr;
    int depth = cache_->match_path(r.path_keys, &t);
    if (depth > 0) {
      r.table = t->fork_prefix(pool, r.path_ends[depth - 1]);
      present = reuse.reused_hbm = r.path_ends[depth - 1];
    }
    // Nodes past the HBM hit that preparation loaded from the lower tiers (same positions: the
    // key chain commits to every earlier token).
    for (; depth < static_cast<int>(r.preloaded.size()); ++depth) {
      const LoadedNode& node = r.preloaded[depth];
      const int start = depth ? r.path_ends[depth - 1] : 0;
      if (node.num_tokens != r.path_ends[depth] - start || node.first_position != start) break;
      if (!ensure_free(keep_free + r.table.blocks_needed(pool, node.num_tokens))) break;
      if (!r.table.append(pool, node.num_tokens, node.k, node.v)) break;
      present += node.num_tokens;
      (node.tier == TierHit::kSsd ? reuse.reused_ssd : reuse.reused_dram) += node.num_tokens;
      // Promoted: later requests find it in HBM.
      if (opts_.hbm_cache)
        cache_->insert_path(r.path_keys[depth], depth ? r.path_keys[depth - 1] : scope_, depth == 0, r.table,
                          r.path_ends[depth]);
    }
    r.preloaded.clear();
  } else if (r.reuse == ReuseMode::kPrefix) {
    const engine::BlockTable* t = nullptr;
    const int n = cache_->match_prefix(std::span<const int32_t>(r.tokens.data(), r.prompt_len), &t);
    if (n > 0) {
      r.table = t->fork_prefix(pool, n);
      present = reuse.reused_hbm = n;
    }
  }
  if (present >= len) {  // the last token is always fed, to get its logits
    const int over = present - (len - 1);
    r.table.truncate(pool, len - 1);
    present = len - 1;
    int* tiers[] = {&reuse.reused_ssd, &reuse.reused_dram, &reuse.reused_hbm};
    int left = over;
    for (int* t : tiers) {
      const int d = std::min(*t, left);
      *t -= d;
      left -= d;
    }
  }
  if (!r.admitted_once) {
    r.admitted_once = true;
    r.t_admit = Clock::now();
    r.usage.reused_hbm = reuse.reused_hbm;
    r.usage.reused_dram = reuse.reused_dram;
    r.usage.reused_ssd = reuse.reused_ssd;
    r.timings.kv_load_ms += ms_between(t0, Clock::now());
  }
  r.usage.recomputed_tokens += std::min(len, r.prompt_len) - std::min(present, r.prompt_len);
  return present;
}

bool ExecutorImpl::swap_in(uint64_t id, int keep_free) {
  Req& r = *reqs_.at(id);
  auto& pool = model_->kv_pool();
  const int bs = pool.layout().block_size;
  const int need = (r.swap_tokens + bs - 1) / bs;
  if (!ensure_free(keep_free + need)) return false;
  if (!r.table.append(pool, r.swap_tokens, r.swap_k.data(), r.swap_v.data())) return false;
  swap_bytes_ -= (r.swap_k.size() + r.swap_v.size()) * sizeof(float);
  r.swap_k = {};
  r.swap_v = {};
  r.swap_tokens = 0;
  return true;
}

bool ExecutorImpl::preempt(uint64_t id, bool swap) {
  Req& r = *reqs_.at(id);
  auto& pool = model_->kv_pool();
  const auto& l = pool.layout();
  const int n = r.table.num_tokens();
  const size_t per = static_cast<size_t>(n) * l.token_floats();
  const size_t bytes = 2 * per * l.num_layers * sizeof(float);
  const bool ok = swap && swap_bytes_ + bytes <= opts_.swap_bytes;
  if (ok) {
    r.swap_k.resize(per * l.num_layers);
    r.swap_v.resize(per * l.num_layers);
    for (int layer = 0; layer < l.num_layers; ++layer)
      r.table.read(pool, layer, 0, n, r.swap_k.data() + layer * per, r.swap_v.data() + layer * per);
    r.swap_tokens = n;
    swap_bytes_ += bytes;
  }
  r.table.release(pool);
  log::pipelines()->debug("[{}] preempted ({} tokens, {})", r.rr.id, n, ok ? "swapped" : "dropped");
  return ok;
}

void ExecutorImpl::release(uint64_t id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  Req& r = *it->second;
  r.table.release(model_->kv_pool());
  swap_bytes_ -= (r.swap_k.size() + r.swap_v.size()) * sizeof(float);
  r.swap_k = {};
  r.swap_v = {};
  r.swap_tokens = 0;
}

// ---- stats -------------------------------------------------------------------------------------

void ExecutorImpl::publish_stats() {
  const SchedulerStats s = sched_->stats();
  const HbmCacheStats c = cache_->stats();
  const LengthPredictorStats p = sched_->predictor().stats();
  const auto& pool = model_->kv_pool();
  std::ostringstream o;
  o << "{\"scheduler\":{\"policy\":\"" << sched_policy_name(sched_->options().policy) << "\",\"steps\":" << s.steps
    << ",\"waiting\":" << s.waiting << ",\"running\":" << s.running << ",\"swapped\":" << s.swapped
    << ",\"admitted\":" << s.admitted << ",\"finished\":" << s.finished << ",\"cancelled\":" << s.cancelled
    << ",\"swaps_out\":" << s.swaps_out << ",\"swaps_in\":" << s.swaps_in << ",\"drops\":" << s.drops
    << ",\"tokens_prefill\":" << s.tokens_prefill << ",\"tokens_decode\":" << s.tokens_decode
    << ",\"length_predictor\":{\"samples\":" << p.samples << ",\"mae\":" << p.mae << ",\"within_2x\":" << p.within_2x
    << "}},\"kv_pool\":{\"blocks\":" << pool.num_blocks() << ",\"free_blocks\":" << pool.free_blocks()
    << ",\"block_size\":" << pool.layout().block_size << ",\"bytes\":" << pool.bytes()
    << ",\"swap_bytes\":" << swap_bytes_ << "},\"hbm_cache\":{\"path_entries\":" << c.path_entries
    << ",\"prefix_entries\":" << c.prefix_entries << ",\"path_hits\":" << c.path_hits
    << ",\"path_misses\":" << c.path_misses << ",\"prefix_hits\":" << c.prefix_hits
    << ",\"prefix_misses\":" << c.prefix_misses << ",\"hit_tokens\":" << c.hit_tokens << ",\"inserts\":" << c.inserts
    << ",\"evictions\":" << c.evictions << "}";
  if (tiers_) o << ",\"tiers\":" << tiers_->stats_json();
  o << ",\"model\":" << json_quote(model_name_) << "}";
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_json_ = o.str();
}

std::string ExecutorImpl::stats_json() const {
  std::lock_guard<std::mutex> lk(stats_mu_);
  return stats_json_;
}

}  // namespace ragd::pipelines
