// Shared by the in-process benchmarks: one run submitted to an Executor and observed until it is
// done (client-side timing: TTFT from submit, inter-token gaps), the two load drivers (closed
// loop: N clients back to back; open loop: each request at its arrival time), and percentiles.
// Thread-safety: run_and_wait may be called from several client threads at once; the drivers call
// `one` from several threads at once.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "ragd/pipelines/executor.h"

namespace ragd::bench {

struct Observed {
  bool ok = false;
  double ttft_ms = -1, e2e_ms = 0;
  std::vector<double> itl_ms;  // gaps between consecutive tokens
  int tokens = 0;
  std::vector<int32_t> token_ids;
  pipelines::Usage usage;
  pipelines::Timings timings;
  std::vector<pipelines::Source> sources;
};

// Submits rr and blocks until its done / error event.
inline Observed run_and_wait(pipelines::Executor& ex, pipelines::RunRequest rr) {
  using Clock = std::chrono::steady_clock;
  Observed r;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  const auto t0 = Clock::now();
  auto last = t0;
  Status st = ex.submit(std::move(rr), [&](const pipelines::RunEvent& ev) {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> lk(mu);
    switch (ev.kind) {
      case pipelines::RunEvent::Kind::kSources:
        if (r.sources.empty()) r.sources = ev.sources;
        break;
      case pipelines::RunEvent::Kind::kToken:
        if (r.tokens == 0) r.ttft_ms = std::chrono::duration<double, std::milli>(now - t0).count();
        else r.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
        ++r.tokens;
        r.token_ids.push_back(ev.token_id);
        break;
      case pipelines::RunEvent::Kind::kDone:
      case pipelines::RunEvent::Kind::kError:
        r.ok = ev.kind == pipelines::RunEvent::Kind::kDone;
        if (!r.ok) std::fprintf(stderr, "run failed: %s\n", ev.error.to_string().c_str());
        r.e2e_ms = std::chrono::duration<double, std::milli>(now - t0).count();
        r.usage = ev.usage;
        r.timings = ev.timings;
        done = true;
        cv.notify_all();
        break;
    }
    return true;
  });
  if (!st.ok()) {
    std::fprintf(stderr, "submit failed: %s\n", st.to_string().c_str());
    return r;
  }
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return done; });
  return r;
}

// Closed loop: `clients` threads take the requests in order, each running one at a time;
// out[i] = one(reqs[i]). *wall_s: the whole run's seconds.
template <class Out, class Req, class One>
std::vector<Out> closed_loop(const std::vector<Req>& reqs, int clients, One&& one, double* wall_s) {
  std::vector<Out> out(reqs.size());
  std::atomic<size_t> next{0};
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> th;
  for (int c = 0; c < clients; ++c)
    th.emplace_back([&] {
      for (size_t i; (i = next++) < reqs.size();) out[i] = one(reqs[i]);
    });
  for (auto& t : th) t.join();
  if (wall_s) *wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

// Open loop: request i starts at its `arrival_s` seconds after the start, on a thread of its own,
// whatever the others are doing; out[i] = one(reqs[i]). *wall_s (may be null): the run's seconds.
template <class Out, class Req, class One>
std::vector<Out> open_loop(const std::vector<Req>& reqs, One&& one, double* wall_s) {
  using Clock = std::chrono::steady_clock;
  std::vector<Out> out(reqs.size());
  const auto t0 = Clock::now();
  std::vector<std::thread> th;
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(reqs[i].arrival_s)));
    th.emplace_back([&, i] { out[i] = one(reqs[i]); });
  }
  for (auto& t : th) t.join();
  if (wall_s) *wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

// p-th percentile (0..100), linear interpolation; 0 for no samples.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = p / 100.0 * (v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(idx)), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - lo);
}

}  // namespace ragd::bench
