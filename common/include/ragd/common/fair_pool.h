// A bounded thread pool shared fairly among keys (tenants). Each key has its own FIFO queue; idle
// threads take the keys with queued work in turn (round robin, one task per turn), and at most
// `per_key_running` tasks of one key run at once. One key's backlog therefore never holds every
// thread: with per_key_running < threads, a task of another key starts as soon as a thread is
// free of the first key's current tasks, however many of the first key's tasks are queued.
// submit() returns false (soft outcome) when `max_queued` tasks are queued in all or the pool is
// stopping. stop() runs what is queued, joins the threads, and is idempotent. A task that throws
// is logged by the caller's wrapper, not here: tasks must not throw.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace ragd {

class FairPool {
 public:
  // per_key_running: 0 = max(1, threads / 2). threads may be 0 (the queue only fills). background:
  // the threads run at the lowest CPU priority (nice 19), taking only what foreground work leaves.
  FairPool(size_t threads, size_t max_queued, size_t per_key_running, std::string name = "fair-pool",
           bool background = false);
  ~FairPool();
  FairPool(const FairPool&) = delete;
  FairPool& operator=(const FairPool&) = delete;

  [[nodiscard]] bool submit(const std::string& key, std::function<void()> fn);
  void stop();
  size_t queued() const;
  size_t per_key_running() const { return per_key_; }

 private:
  struct Lane {
    std::deque<std::function<void()>> tasks;
    size_t running = 0;
    bool in_turn = false;  // in turns_
  };
  void run();
  // Puts `key` in turn when it has queued work and room to run. Under mu_.
  void offer_turn(const std::string& key, Lane& lane);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, Lane> lanes_;  // guarded by mu_; a lane with nothing left is erased
  std::deque<std::string> turns_;                // guarded by mu_: keys that may start a task, in order
  size_t queued_ = 0;                            // guarded by mu_
  bool stopping_ = false;                        // guarded by mu_
  const size_t max_queued_;
  const size_t per_key_;
  std::vector<std::thread> threads_;
  std::string name_;
};

}  // namespace ragd
