// A bounded FIFO thread pool. submit() returns false (soft outcome) when the queue is full or the
// pool is stopped. stop() drains queued work, joins the threads, and is idempotent.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ragd {

class ThreadPool {
 public:
  // background: the threads run at the lowest CPU priority (nice 19), so that they take only
  // what foreground work (model compute, request handling) leaves over.
  ThreadPool(size_t threads, size_t max_queue, std::string name = "pool", bool background = false);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  [[nodiscard]] bool submit(std::function<void()> fn);
  void stop();
  size_t queued() const;

 private:
  void run();
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  size_t max_queue_;
  std::vector<std::thread> threads_;
  std::string name_;
};

}  // namespace ragd
