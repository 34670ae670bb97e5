// ExecutorImpl: the Executor over one Model, its KvPool, an HbmCache and optional lower tiers and
// corpus. One scheduler thread owns the model, the pool, the cache and every admitted request;
// retrieval and prompt building run on a small thread pool and hand requests over through a
// queue (inbox_, guarded by mu_).
// Thread-safety: the public Executor methods are thread-safe; the KvHost methods run on the
// scheduler thread only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ragd/common/thread_pool.h"
#include "ragd/engine/model.h"
#include "ragd/engine/sampler.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/hbm_cache.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/pipelines/runtime.h"
#include "ragd/pipelines/scheduler.h"

#include "lower_tiers.h"
#include "ragd/pipelines/prompt_builder.h"

namespace ragd::retrieval {
class Corpus;
}

namespace ragd::pipelines {

class ExecutorImpl final : public Executor, private KvHost {
 public:
  struct Deps {
    std::unique_ptr<engine::Model> model;
    std::shared_ptr<const engine::Tokenizer> tokenizer;
    std::shared_ptr<retrieval::Corpus> corpus;  // null: pipelines with top_k > 0 fail
    std::unique_ptr<LowerTiers> tiers;          // null: HBM only
    std::vector<PipelineSpec> pipelines;
    std::string model_name;
  };
  static Result<std::unique_ptr<ExecutorImpl>> create(const RuntimeOptions& opts, Deps deps);
  ~ExecutorImpl() override;

  Status submit(RunRequest req, EventSink sink) override;
  void cancel(const std::string& request_id) override;
  std::vector<PipelineInfo> pipelines() const override;
  bool ready() const override { return !stopping_.load(); }
  std::string model_name() const override { return model_name_; }
  std::string stats_json() const override;
  // Drains queued and running requests, then joins the threads. Idempotent.
  void stop();

 private:
  using Clock = std::chrono::steady_clock;
  struct Req {
    uint64_t sid = 0;
    RunRequest rr;
    EventSink sink;
    const PipelineSpec* spec = nullptr;
    ReuseMode reuse = ReuseMode::kNone;
    std::vector<int32_t> tokens;  // prompt, then generated
    int prompt_len = 0;
    int max_new = 0;
    std::vector<std::vector<int32_t>> path;  // knowledge tree: [prefix][doc 1]..[doc n]
    std::vector<int> path_ends;              // cumulative token ends of path segments
    std::vector<Hash128> path_keys;          // in-engine chained keys of path nodes
    std::vector<LoadedNode> preloaded;       // path nodes loaded from DRAM / SSD during preparation
    engine::BlockTable table;
    std::vector<float> swap_k, swap_v;
    int swap_tokens = 0;
    std::unique_ptr<engine::Sampler> sampler;
    std::unique_ptr<engine::StreamDecoder> decoder;
    std::string out_text;
    std::vector<int32_t> stop_ids;
    Usage usage;
    Timings timings;
    Clock::time_point t_submit, t_ready, t_admit, t_first, t_last;
    bool admitted_once = false, inserted = false;
    std::string error;  // set when preparation failed
  };

  ExecutorImpl(const RuntimeOptions& opts, Deps deps);
  void prepare(std::unique_ptr<Req> r);  // retrieval pool: retrieval + prompt
  void loop();                           // scheduler thread
  void step();
  void accept(std::unique_ptr<Req> r);
  void finish(uint64_t sid, const std::string& reason);
  void fail(uint64_t sid, const Status& st);
  void on_sampled(Req& r, const engine::SampleResult& s);
  void insert_reusable(Req& r);
  void publish_stats();
  bool emit(Req& r, const RunEvent& ev);

  // KvHost
  bool ensure_free(int blocks) override;
  int blocks_needed(uint64_t id, int n) const override;
  int admit(uint64_t id, int keep_free) override;
  bool swap_in(uint64_t id, int keep_free) override;
  bool preempt(uint64_t id, bool swap) override;
  void release(uint64_t id) override;

  RuntimeOptions opts_;
  std::unique_ptr<engine::Model> model_;
  std::shared_ptr<const engine::Tokenizer> tok_;
  std::shared_ptr<retrieval::Corpus> corpus_;
  std::unique_ptr<LowerTiers> tiers_;
  std::vector<PipelineSpec> specs_;
  std::string model_name_;
  std::unique_ptr<PromptBuilder> prompts_;
  Hash128 scope_;  // in-engine path key root: model fingerprint + layout

  // scheduler thread only
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<HbmCache> cache_;
  std::unordered_map<uint64_t, std::unique_ptr<Req>> reqs_;
  std::unordered_map<std::string, uint64_t> by_name_;
  std::unordered_set<std::string> early_cancels_;  // cancelled while still in retrieval
  size_t swap_bytes_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Req>> inbox_;      // guarded by mu_
  std::vector<std::string> cancels_;            // guarded by mu_
  std::unordered_set<std::string> live_names_;  // guarded by mu_: submitted, not yet done
  int pending_ = 0;                             // guarded by mu_: submitted, not yet in inbox
  uint64_t next_sid_ = 1;                       // guarded by mu_
  std::atomic<bool> stopping_{false};
  bool stopped_ = false;                        // guarded by mu_

  mutable std::mutex stats_mu_;
  std::string stats_json_ = "{}";  // guarded by stats_mu_

  std::unique_ptr<ThreadPool> retrieval_pool_;
  std::thread thread_;
};

}  // namespace ragd::pipelines
