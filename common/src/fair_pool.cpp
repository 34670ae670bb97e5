#include "ragd/common/fair_pool.h"

#include <algorithm>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace ragd {

FairPool::FairPool(size_t threads, size_t max_queued, size_t per_key_running, std::string name, bool background)
    : max_queued_(max_queued),
      per_key_(per_key_running > 0 ? per_key_running : std::max<size_t>(1, threads / 2)),
      name_(std::move(name)) {
  threads_.reserve(threads);
  for (size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this, background] {
      // Linux: a thread's nice value is its own (setpriority on the thread id).
      if (background) (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
      run();
    });
}

FairPool::~FairPool() { stop(); }

void FairPool::offer_turn(const std::string& key, Lane& lane) {
  if (!lane.in_turn && !lane.tasks.empty() && lane.running < per_key_) {
    lane.in_turn = true;
    turns_.push_back(key);
    cv_.notify_one();
  }
}

bool FairPool::submit(const std::string& key, std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_ || queued_ >= max_queued_) return false;
  Lane& lane = lanes_[key];
  lane.tasks.push_back(std::move(fn));
  ++queued_;
  offer_turn(key, lane);
  return true;
}

void FairPool::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

size_t FairPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

void FairPool::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    // Queued tasks whose keys are all at their limit wait for a running task of theirs to end
    // (which offers the key's turn again), also while stopping.
    cv_.wait(lock, [this] { return !turns_.empty() || (stopping_ && queued_ == 0); });
    if (turns_.empty()) return;  // stopping and drained
    const std::string key = std::move(turns_.front());
    turns_.pop_front();
    Lane& lane = lanes_.at(key);
    lane.in_turn = false;
    std::function<void()> fn = std::move(lane.tasks.front());
    lane.tasks.pop_front();
    --queued_;
    ++lane.running;
    offer_turn(key, lane);  // its next task takes its turn behind the other keys
    lock.unlock();
    fn();
    fn = nullptr;  // captured state is released outside the lock
    lock.lock();
    --lane.running;  // a lane with a running task is never erased: the reference still holds
    offer_turn(key, lane);
    if (lane.tasks.empty() && lane.running == 0) lanes_.erase(key);
    if (stopping_ && queued_ == 0) cv_.notify_all();
  }
}

}  // namespace ragd
