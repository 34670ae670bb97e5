#include "ragd/daemon/metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ragd/common/check.h"

namespace ragd::daemon {
namespace {

std::string fmt_double(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void escape_label(std::string& out, const std::string& v) {
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

void escape_help(std::string& out, const std::string& v) {
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
}

}  // namespace

MetricFamily::MetricFamily(std::string name, std::string help, Kind kind, std::vector<std::string> labels,
                           std::vector<double> buckets)
    : name_(std::move(name)), help_(std::move(help)), kind_(kind), labels_(std::move(labels)),
      buckets_(std::move(buckets)) {
  RAGD_CHECK(std::is_sorted(buckets_.begin(), buckets_.end())) << name_ << ": buckets must be sorted";
}

void MetricFamily::inc(const LabelValues& lv, double by) {
  RAGD_CHECK(kind_ != Kind::kHistogram && lv.size() == labels_.size()) << name_;
  std::lock_guard<std::mutex> l(mu_);
  series_[lv].value += by;
}

void MetricFamily::set(const LabelValues& lv, double v) {
  RAGD_CHECK(kind_ == Kind::kGauge && lv.size() == labels_.size()) << name_;
  std::lock_guard<std::mutex> l(mu_);
  series_[lv].value = v;
}

void MetricFamily::observe(const LabelValues& lv, double v) {
  RAGD_CHECK(kind_ == Kind::kHistogram && lv.size() == labels_.size()) << name_;
  size_t b = std::lower_bound(buckets_.begin(), buckets_.end(), v) - buckets_.begin();  // first bound >= v
  std::lock_guard<std::mutex> l(mu_);
  Series& s = series_[lv];
  if (s.bucket.empty()) s.bucket.assign(buckets_.size() + 1, 0);
  s.bucket[b] += 1;
  s.count += 1;
  s.value += v;
}

double MetricFamily::value(const LabelValues& lv) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = series_.find(lv);
  return it == series_.end() ? 0.0 : it->second.value;
}

uint64_t MetricFamily::count(const LabelValues& lv) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = series_.find(lv);
  return it == series_.end() ? 0 : it->second.count;
}

void MetricFamily::clear() {
  std::lock_guard<std::mutex> l(mu_);
  series_.clear();
}

std::string MetricFamily::label_str(const LabelValues& lv, const char* extra_key, const std::string& extra_val) const {
  if (labels_.empty() && !extra_key) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels_.size(); ++i) {
    if (i) out += ',';
    out += labels_[i];
    out += "=\"";
    escape_label(out, lv[i]);
    out += '"';
  }
  if (extra_key) {
    if (!labels_.empty()) out += ',';
    out += extra_key;
    out += "=\"";
    out += extra_val;
    out += '"';
  }
  return out + "}";
}

void MetricFamily::render(std::string& out) const {
  out += "# HELP " + name_ + " ";
  escape_help(out, help_);
  out += "\n# TYPE " + name_ + (kind_ == Kind::kCounter ? " counter\n" : kind_ == Kind::kGauge ? " gauge\n" : " histogram\n");
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& [lv, s] : series_) {
    if (kind_ != Kind::kHistogram) {
      out += name_ + label_str(lv) + " " + fmt_double(s.value) + "\n";
      continue;
    }
    uint64_t cum = 0;
    for (size_t b = 0; b < buckets_.size(); ++b) {
      cum += s.bucket[b];
      out += name_ + "_bucket" + label_str(lv, "le", fmt_double(buckets_[b])) + " " + std::to_string(cum) + "\n";
    }
    out += name_ + "_bucket" + label_str(lv, "le", "+Inf") + " " + std::to_string(s.count) + "\n";
    out += name_ + "_sum" + label_str(lv) + " " + fmt_double(s.value) + "\n";
    out += name_ + "_count" + label_str(lv) + " " + std::to_string(s.count) + "\n";
  }
}

MetricFamily& MetricsRegistry::add(std::unique_ptr<MetricFamily> f) {
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& e : families_) RAGD_CHECK(e->name() != f->name()) << "duplicate metric " << f->name();
  families_.push_back(std::move(f));
  return *families_.back();
}

MetricFamily& MetricsRegistry::counter(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  return add(std::make_unique<MetricFamily>(name, help, MetricFamily::Kind::kCounter, std::move(labels), std::vector<double>{}));
}
MetricFamily& MetricsRegistry::gauge(const std::string& name, const std::string& help, std::vector<std::string> labels) {
  return add(std::make_unique<MetricFamily>(name, help, MetricFamily::Kind::kGauge, std::move(labels), std::vector<double>{}));
}
MetricFamily& MetricsRegistry::histogram(const std::string& name, const std::string& help, std::vector<std::string> labels,
                                         std::vector<double> buckets) {
  return add(std::make_unique<MetricFamily>(name, help, MetricFamily::Kind::kHistogram, std::move(labels), std::move(buckets)));
}

std::string MetricsRegistry::render(bool include_restricted) const {
  std::string out;
  std::lock_guard<std::mutex> l(mu_);
  for (const auto& f : families_)
    if (include_restricted || !f->restricted()) f->render(out);
  return out;
}

std::vector<double> request_latency_buckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 60, 120};
}
std::vector<double> token_latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1, 2.5, 5};
}

}  // namespace ragd::daemon
