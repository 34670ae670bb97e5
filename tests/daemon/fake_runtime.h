// Test double for the HTTP layer: a deterministic Executor and DocumentApi that never touch a
// model. Token i of a run is "w<(seed+i)%7> "; pipelines "default" and "docs" exist; queries
// containing "slow" sleep 20 ms per token, "big" makes 64 KiB tokens, "FAIL" ends in an error
// after one token, "queued" sends its sources and then waits, counted by stats() as waiting for
// the scheduler (not running), until admit_queued(). Records what it was asked so tests can check
// request parsing. A document whose text contains "slow" takes 200 ms to ingest.
// Thread-safety: thread-safe (one worker thread per run, joined on destruction).
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ragd/pipelines/runtime.h"

namespace ragd::testing {

class FakeExecutor : public pipelines::Executor {
 public:
  ~FakeExecutor() override;
  Status submit(pipelines::RunRequest req, pipelines::EventSink sink) override;
  void cancel(const std::string& request_id) override;
  std::vector<pipelines::PipelineInfo> pipelines() const override;
  bool ready() const override { return true; }
  std::string model_name() const override { return "fake-llama"; }
  pipelines::ExecutorStats stats() const override;

  int active() const { return active_.load(); }
  int queued() const { return queued_.load(); }  // "queued" runs waiting for admit_queued()
  void admit_queued();
  int cancels() const { return cancels_.load(); }
  int sink_refusals() const { return sink_refusals_.load(); }
  pipelines::RunRequest last_request() const;
  bool wait_idle(int timeout_ms) const;
  std::atomic<bool> reject_queue_full{false};
  std::atomic<bool> ssd_tier_failed{false};  // stats() reports the SSD tier off with a raw error

 private:
  void run(pipelines::RunRequest req, pipelines::EventSink sink);
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<std::thread> threads_;      // guarded by mu_
  std::set<std::string> cancelled_;       // guarded by mu_
  pipelines::RunRequest last_;            // guarded by mu_
  std::atomic<int> active_{0}, cancels_{0}, sink_refusals_{0}, queued_{0};
  // Runs the scheduler counts (stats()): as the executor, a run leaves them before its final event,
  // so a client that has the answer never sees its run still running. active_ lasts to the thread's end.
  std::atomic<int> live_{0};
  bool admitted_ = false;                 // guarded by mu_
  std::atomic<long> finished_runs_{0};
};

class FakeDocuments : public pipelines::DocumentApi {
 public:
  Result<pipelines::IngestSummary> ingest(std::vector<pipelines::DocumentInput> docs) override;
  Result<pipelines::DocumentInfo> get(const std::string& id, const std::string& tenant) const override;
  Status remove(const std::string& id, const std::string& tenant) override;
  Result<pipelines::DocumentPage> list(const std::string& tenant, const std::string& after, size_t limit) const override;
  Result<std::vector<std::vector<float>>> embed(const std::vector<std::string>& texts) const override;
  static std::vector<float> embed_one(const std::string& text);  // dim 8, unit norm

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, std::string>, pipelines::DocumentInput> docs_;  // guarded by mu_; (tenant, id)
};

}  // namespace ragd::testing
