// A bounded FIFO thread pool: a FairPool (fair_pool.h) with one queue, whose threads all serve it.
// submit() returns false (soft outcome) when the queue is full or the pool is stopped. stop() drains
// queued work, joins the threads, and is idempotent.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "ragd/common/fair_pool.h"

namespace ragd {

class ThreadPool {
 public:
  // background: the threads run at the lowest CPU priority (nice 19), so that they take only
  // what foreground work (model compute, request handling) leaves over.
  ThreadPool(size_t threads, size_t max_queue, std::string name = "pool", bool background = false)
      : pool_(threads, max_queue, threads > 0 ? threads : 1, std::move(name), background) {}
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  [[nodiscard]] bool submit(std::function<void()> fn) { return pool_.submit(std::string(), std::move(fn)); }
  void stop() { pool_.stop(); }
  size_t queued() const { return pool_.queued(); }

 private:
  FairPool pool_;
};

}  // namespace ragd
