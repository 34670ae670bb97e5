// A small Prometheus registry: counters, gauges and histograms with labels, rendered in the
// text exposition format (version 0.0.4).
//
//   auto& reqs = reg.counter("ragd_http_requests_total", "HTTP requests", {"route", "status"});
//   reqs.inc({"/healthz", "200"});
//   auto& ttft = reg.histogram("ragd_time_to_first_token_seconds", "TTFT", {}, latency_buckets());
//   ttft.observe({}, 0.042);
//
// Families are created once at start-up; the returned references stay valid for the registry's
// lifetime. Label values are escaped on output. A family marked restricted (at start-up) is left
// out of render(false): the daemon's /metrics shows those (cache contents) to operators only.
// Thread-safety: every method is thread-safe (one mutex per family; render() takes each in turn).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace ragd::daemon {

using LabelValues = std::vector<std::string>;

class MetricFamily {
 public:
  enum class Kind { kCounter, kGauge, kHistogram };
  MetricFamily(std::string name, std::string help, Kind kind, std::vector<std::string> labels,
               std::vector<double> buckets);

  void inc(const LabelValues& lv, double by = 1.0);  // counter / gauge
  void set(const LabelValues& lv, double v);          // gauge
  void observe(const LabelValues& lv, double v);      // histogram
  double value(const LabelValues& lv) const;          // counter / gauge (0 when absent)
  uint64_t count(const LabelValues& lv) const;        // histogram sample count
  void clear();                                       // drop every series (gauges refreshed from stats)
  void render(std::string& out) const;
  const std::string& name() const { return name_; }
  MetricFamily& restrict() {
    restricted_.store(true);
    return *this;
  }
  bool restricted() const { return restricted_.load(); }

 private:
  struct Series {
    double value = 0;              // counter/gauge; histogram sum
    uint64_t count = 0;            // histogram
    std::vector<uint64_t> bucket;  // histogram, non-cumulative per bucket (+Inf last)
  };
  std::string label_str(const LabelValues& lv, const char* extra_key = nullptr,
                        const std::string& extra_val = {}) const;
  std::string name_, help_;
  Kind kind_;
  std::vector<std::string> labels_;
  std::vector<double> buckets_;
  std::atomic<bool> restricted_{false};
  mutable std::mutex mu_;
  std::map<LabelValues, Series> series_;  // guarded by mu_
};

class MetricsRegistry {
 public:
  MetricFamily& counter(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  MetricFamily& gauge(const std::string& name, const std::string& help, std::vector<std::string> labels = {});
  MetricFamily& histogram(const std::string& name, const std::string& help, std::vector<std::string> labels,
                          std::vector<double> buckets);
  // Every family; include_restricted = false leaves out the restricted ones.
  std::string render(bool include_restricted = true) const;

 private:
  MetricFamily& add(std::unique_ptr<MetricFamily> f);
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<MetricFamily>> families_;  // guarded by mu_; append-only
};

// Buckets in seconds for request-level latencies (1 ms .. 120 s) and per-token latencies (0.5 ms .. 5 s).
std::vector<double> request_latency_buckets();
std::vector<double> token_latency_buckets();

}  // namespace ragd::daemon
