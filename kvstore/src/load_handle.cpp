#include "ragd/kvstore/load_handle.h"

namespace ragd::kvstore {

LoadHandle::LoadHandle(size_t n, int num_layers)
    : n_(n),
      num_layers_(num_layers),
      layers_(new std::atomic<int>[n]),
      source_(new std::atomic<uint8_t>[n]),
      segs_(n),
      failed_(n, 0) {
  for (size_t i = 0; i < n; ++i) {
    layers_[i].store(0, std::memory_order_relaxed);
    source_[i].store(static_cast<uint8_t>(Tier::kSsd), std::memory_order_relaxed);
  }
}

size_t LoadHandle::nodes_ready() const {
  size_t i = 0;
  while (i < n_ && node_ready(i)) ++i;
  return i;
}

bool LoadHandle::node_ok(size_t i) const {
  if (!done()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return !failed_[i] && node_ready(i);
}

size_t LoadHandle::prefix_ok() const {
  size_t i = 0;
  while (i < n_ && node_ok(i)) ++i;
  return i;
}

Status LoadHandle::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

SegmentRef LoadHandle::segment(size_t i) const {
  if (layers_ready(i) == 0) return nullptr;
  return segs_[i];  // written before the release store that made layers_ready(i) > 0
}

void LoadHandle::wait() const {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return done(); });
}

bool LoadHandle::wait_for(std::chrono::milliseconds d) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, d, [this] { return done(); });
}

void LoadHandle::publish_segment(size_t i, SegmentRef seg, Tier src) {
  segs_[i] = std::move(seg);
  source_[i].store(static_cast<uint8_t>(src), std::memory_order_release);
}

void LoadHandle::set_layers(size_t i, int layers) {
  layers_[i].store(layers, std::memory_order_release);
  if (opts_.on_progress) opts_.on_progress(i, layers);
}

void LoadHandle::fail(size_t i, const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  failed_[i] = 1;
  if (status_.ok()) status_ = st;
}

void LoadHandle::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    elapsed_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start_).count();
    done_.store(true, std::memory_order_release);
  }
  cv_.notify_all();
  if (opts_.on_done) opts_.on_done();
}

double LoadHandle::elapsed_ms() const {
  std::lock_guard<std::mutex> lock(mu_);
  return elapsed_ms_;
}

}  // namespace ragd::kvstore
