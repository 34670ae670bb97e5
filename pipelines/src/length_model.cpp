#include "ragd/pipelines/length_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "ragd/common/text_file.h"

namespace ragd::pipelines {

Status LengthTrainOptions::validate() const {
  if (dim < 1 || dim > (1u << 22)) return Status::InvalidArgument("length model: dim must be in [1, 4194304], got " + std::to_string(dim));
  if (edges.empty()) return Status::InvalidArgument("length model: edges must name at least one bucket edge");
  for (size_t i = 0; i < edges.size(); ++i)
    if (edges[i] < 1 || (i > 0 && edges[i] <= edges[i - 1]))
      return Status::InvalidArgument("length model: edges must be positive and strictly ascending");
  if (iterations < 1) return Status::InvalidArgument("length model: iterations must be >= 1");
  if (!(learning_rate > 0)) return Status::InvalidArgument("length model: learning_rate must be > 0");
  if (!(l2 >= 0)) return Status::InvalidArgument("length model: l2 must be >= 0");
  return Status::OK();
}

namespace {

// Softmax of `logits` in place (max-subtracted).
void softmax(std::vector<double>& z) {
  const double m = *std::max_element(z.begin(), z.end());
  double s = 0;
  for (double& v : z) s += (v = std::exp(v - m));
  for (double& v : z) v /= s;
}

}  // namespace

std::vector<double> train_softmax(const std::vector<SparseRow>& x, const std::vector<int>& y, int classes, uint32_t cols,
                                  int iterations, double learning_rate, double l2) {
  const size_t k = static_cast<size_t>(std::max(1, classes));
  const size_t n = x.size();
  std::vector<double> w(k * cols, 0.0), m(w.size(), 0.0), v(w.size(), 0.0), g(w.size(), 0.0);
  std::vector<double> z(k);
  constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  double b1t = 1, b2t = 1;
  for (int it = 0; it < iterations; ++it) {
    for (size_t j = 0; j < w.size(); ++j) g[j] = l2 * w[j];
    for (size_t i = 0; i < n; ++i) {
      for (size_t c = 0; c < k; ++c) {
        double s = 0;
        for (const auto& [col, val] : x[i]) s += w[c * cols + col] * val;
        z[c] = s;
      }
      softmax(z);
      z[static_cast<size_t>(y[i])] -= 1.0;  // d(-log p_y)/d logits
      for (size_t c = 0; c < k; ++c) {
        const double d = z[c] / static_cast<double>(n);
        if (d == 0) continue;
        for (const auto& [col, val] : x[i]) g[c * cols + col] += d * val;
      }
    }
    b1t *= b1;
    b2t *= b2;
    for (size_t j = 0; j < w.size(); ++j) {
      m[j] = b1 * m[j] + (1 - b1) * g[j];
      v[j] = b2 * v[j] + (1 - b2) * g[j] * g[j];
      w[j] -= learning_rate * (m[j] / (1 - b1t)) / (std::sqrt(v[j] / (1 - b2t)) + eps);
    }
  }
  return w;
}

int LengthModel::bucket_of(int length) const {
  for (size_t k = 0; k < edges_.size(); ++k)
    if (length <= edges_[k]) return static_cast<int>(k);
  return static_cast<int>(edges_.size());
}

Result<std::shared_ptr<const LengthModel>> LengthModel::train(const std::vector<LengthSample>& samples,
                                                              const LengthTrainOptions& opts) {
  RAGD_RETURN_IF_ERROR(opts.validate());
  if (samples.empty()) return Status::InvalidArgument("length model: no samples to train on");
  std::shared_ptr<LengthModel> m(new LengthModel());
  m->dim_ = opts.dim;
  m->edges_ = opts.edges;
  const int k = static_cast<int>(opts.edges.size()) + 1;
  m->means_.assign(k, 0.0);
  m->maxima_.assign(k, 0.0);
  std::vector<double> count(k, 0.0);
  std::vector<SparseRow> x;
  std::vector<int> y;
  x.reserve(samples.size());
  y.reserve(samples.size());
  for (const LengthSample& s : samples) {
    const int len = std::max(1, s.output_tokens);
    const int b = m->bucket_of(len);
    x.push_back(length_feature_row(s.features, opts.dim));
    y.push_back(b);
    m->means_[b] += len;
    m->maxima_[b] = std::max<double>(m->maxima_[b], len);
    count[b] += 1;
  }
  for (int b = 0; b < k; ++b) {
    const double lo = b == 0 ? 1 : opts.edges[b - 1] + 1;
    const double hi = b + 1 < k ? opts.edges[b] : 2.0 * opts.edges.back();
    if (count[b] > 0) {
      m->means_[b] /= count[b];
    } else {  // never seen: the middle of its range
      m->means_[b] = 0.5 * (lo + hi);
      m->maxima_[b] = hi;
    }
  }
  const std::vector<double> w =
      train_softmax(x, y, k, kLengthDenseFeatures + opts.dim, opts.iterations, opts.learning_rate, opts.l2);
  m->weights_.assign(w.begin(), w.end());
  return std::shared_ptr<const LengthModel>(std::move(m));
}

std::vector<double> LengthModel::probabilities(const LengthFeatures& f) const {
  const SparseRow row = length_feature_row(f, dim_);
  const size_t cols = kLengthDenseFeatures + dim_;
  std::vector<double> z(means_.size());
  for (size_t c = 0; c < z.size(); ++c) {
    double s = 0;
    for (const auto& [col, val] : row) s += static_cast<double>(weights_[c * cols + col]) * val;
    z[c] = s;
  }
  softmax(z);
  return z;
}

double LengthModel::remaining(const std::vector<double>& probs, int generated, int max_tokens) const {
  const double g = std::max(0, generated);
  const double cap = std::max(1.0, static_cast<double>(max_tokens) - g);
  const int k = buckets();
  double wsum = 0, esum = 0;
  for (int b = 0; b < k && b < static_cast<int>(probs.size()); ++b) {
    const double lo = b == 0 ? 1 : edges_[b - 1] + 1;
    // The bucket ends at its edge, or sooner at the longest run seen in it.
    double hi = std::max(maxima_[b], lo);
    if (b + 1 < k) hi = std::min<double>(hi, edges_[b]);
    if (max_tokens > 0) hi = std::min<double>(hi, max_tokens);
    if (hi < lo || hi <= g) continue;  // impossible under max_tokens, or already passed
    if (lo > g) {
      const double mean = std::clamp(means_[b], lo, hi);
      wsum += probs[b];
      esum += probs[b] * (mean - g);
    } else {  // g inside the bucket: its part above g, uniform
      const double w = probs[b] * (hi - g) / (hi - lo + 1);
      wsum += w;
      esum += w * 0.5 * (hi - g + 1);
    }
  }
  // Every bucket passed: the run is longer than anything seen in training; expect half as much
  // again as it has generated (at least one token).
  const double r = wsum > 0 ? esum / wsum : std::max(1.0, 0.5 * g);
  return std::clamp(r, 1.0, cap);
}

std::string LengthModel::serialize() const {
  std::string out = "ragd-length-model 1\ndim " + std::to_string(dim_) + "\nedges";
  char buf[32];
  for (int e : edges_) out += " " + std::to_string(e);
  out += "\nmeans";
  for (double v : means_) {
    std::snprintf(buf, sizeof buf, " %.9g", v);
    out += buf;
  }
  out += "\nmaxima";
  for (double v : maxima_) {
    std::snprintf(buf, sizeof buf, " %.9g", v);
    out += buf;
  }
  out += "\n";
  const size_t cols = kLengthDenseFeatures + dim_;
  for (size_t c = 0; c < means_.size(); ++c) {
    for (size_t j = 0; j < cols; ++j) {
      const float v = weights_[c * cols + j];
      if (v == 0) {
        out += j ? " 0" : "0";
      } else {
        std::snprintf(buf, sizeof buf, j ? " %.8g" : "%.8g", static_cast<double>(v));
        out += buf;
      }
    }
    out += "\n";
  }
  return out;
}

Status LengthModel::save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  RAGD_RETURN_IF_ERROR(write_text_file(tmp, serialize()));
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError(path + ": rename failed: " + ec.message());
  return Status::OK();
}

Result<std::shared_ptr<const LengthModel>> LengthModel::parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  auto bad = [&](const std::string& what) {
    return Status::InvalidArgument("length model line " + std::to_string(lineno) + ": " + what);
  };
  auto next = [&](const char* key, std::istringstream* fields) -> bool {
    if (!std::getline(in, line)) return false;
    ++lineno;
    fields->str(line);
    fields->clear();
    std::string k;
    *fields >> k;
    return k == key;
  };
  std::shared_ptr<LengthModel> m(new LengthModel());
  std::istringstream f;
  if (!next("ragd-length-model", &f)) return bad("not a ragd length model (expected 'ragd-length-model 1')");
  int version = 0;
  if (!(f >> version) || version != 1) return bad("unsupported version");
  if (!next("dim", &f) || !(f >> m->dim_) || m->dim_ < 1) return bad("expected 'dim D' with D >= 1");
  if (!next("edges", &f)) return bad("expected 'edges ...'");
  for (int e; f >> e;) m->edges_.push_back(e);
  LengthTrainOptions check;
  check.edges = m->edges_;
  if (!check.validate().ok()) return bad("edges must be positive and strictly ascending");
  const size_t k = m->edges_.size() + 1;
  if (!next("means", &f)) return bad("expected 'means ...'");
  for (double v; f >> v;) m->means_.push_back(v);
  if (m->means_.size() != k) return bad("expected " + std::to_string(k) + " means");
  if (!next("maxima", &f)) return bad("expected 'maxima ...'");
  for (double v; f >> v;) m->maxima_.push_back(v);
  if (m->maxima_.size() != k) return bad("expected " + std::to_string(k) + " maxima");
  const size_t cols = kLengthDenseFeatures + m->dim_;
  m->weights_.reserve(k * cols);
  for (size_t c = 0; c < k; ++c) {
    if (!std::getline(in, line)) return bad("missing weight rows");
    ++lineno;
    std::istringstream row(line);
    size_t got = 0;
    for (float v; row >> v; ++got) m->weights_.push_back(v);
    if (got != cols || !row.eof()) return bad("expected " + std::to_string(cols) + " weights");
  }
  return std::shared_ptr<const LengthModel>(std::move(m));
}

Result<std::shared_ptr<const LengthModel>> LengthModel::load(const std::string& path) {
  RAGD_ASSIGN_OR_RETURN(const std::string text, read_text_file(path, "length model"));
  auto r = parse(text);
  if (!r.ok()) return Status::InvalidArgument(path + ": " + r.status().message());
  return r;
}

}  // namespace ragd::pipelines
