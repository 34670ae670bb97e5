// The two performance models of iterative RAG (iterative.h):
//   SearchTimeModel  PipeRAG: search latency as a function of nprobe, fitted online (least squares
//                    over the last 64 searches), and the largest nprobe predicted to finish within
//                    a time budget (the decode time of one retrieval interval).
//   SpecStride       RaLMSpec's OS3: the verification stride s that maximises the expected number
//                    of boundaries settled per unit of time, (1 - g^s) / (1 - g) / (s * a + b), from
//                    a = the time of one speculation step (one interval of decoding), b = the time
//                    of one verification, and g = the speculation accuracy over the last 5
//                    verified boundaries, capped at 0.6. A stride of 1 means that waiting for the
//                    search at once is best: the speculation is then not applied at all.
#pragma once

#include <deque>
#include <mutex>
#include <utility>

namespace ragd::pipelines {

// Thread-safety: thread-safe (searches report from the retrieval threads).
class SearchTimeModel {
 public:
  void observe(int nprobe, double ms);
  // Predicted latency of one search at nprobe (ms); 0 before any observation.
  double predict(int nprobe) const;
  // The largest nprobe among 1, 2, 4, ..., max_nprobe predicted to fit in budget_ms; 1 when none
  // does; max_nprobe while nothing has been observed.
  int choose(double budget_ms, int max_nprobe) const;

 private:
  double predict_locked(int nprobe) const;
  mutable std::mutex mu_;
  std::deque<std::pair<int, double>> obs_;  // guarded by mu_: (nprobe, ms), newest last
};

// Thread-safety: not thread-safe; one run's, on the scheduler thread.
class SpecStride {
 public:
  void observe_step_ms(double ms);    // one speculation step
  void observe_verify_ms(double ms);  // one verification round trip
  void observe(bool hit);             // one verified boundary
  double accuracy() const;            // over the window, capped at 0.6; 0.5 before any
  double hit_rate() const;            // over the window, uncapped; 1 before any
  int stride(int max_stride) const;   // in [1, max_stride]

 private:
  double step_ms_ = 0, verify_ms_ = 0;  // EWMAs; 0 = not observed yet
  std::deque<bool> window_;             // last 5 verdicts
};

}  // namespace ragd::pipelines
