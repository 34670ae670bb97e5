// LengthModel: a trained head that predicts a request's output length as a distribution over
// length ranges (S³'s classes of ranges rather than an exact length), and from it the REMAINING
// length once some tokens are generated.
//
// Model: multinomial logistic (softmax) regression from length_feature_row() to K buckets with
// upper edges e_0 < e_1 < ... < e_{K-2} (bucket k holds lengths in (e_{k-1}, e_k], the last one
// everything above e_{K-2}). Trained by full-batch Adam on the mean cross-entropy plus an L2
// penalty (deterministic: the same samples and options give the same weights). Each bucket keeps
// the mean and the largest length seen in training.
//
// Remaining length after g generated tokens is E[L - g | L > g] under the predicted distribution:
// buckets entirely at or below g drop out, a bucket above g contributes its training mean, the
// bucket holding g contributes the part above g taken as uniform up to the longest run seen in
// that bucket in training (so the estimate is revised as
// decoding proceeds: a run that outlives the short buckets is predicted long). Clamped to
// [1, max(1, max_tokens - g)].
//
// File format (text, `ragctl length-train` writes it, runtime.length_model reads it):
//   ragd-length-model 1
//   dim D
//   edges e_0 .. e_{K-2}
//   means m_0 .. m_{K-1}
//   maxima x_0 .. x_{K-1}
//   then K lines of kLengthDenseFeatures + D weights.
//
// Thread-safety: immutable after construction; const methods may be called from any thread, and
// one model is shared (std::shared_ptr<const LengthModel>) by every scheduler that uses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/pipelines/length_features.h"

namespace ragd::pipelines {

// One finished run as the length log records it (length_log.h): features + the true length.
struct LengthSample {
  LengthFeatures features;
  int output_tokens = 0;
  std::string finish_reason;  // "stop" | "length"
};

struct LengthTrainOptions {
  uint32_t dim = 4096;            // hashed feature slots; default 4096
  std::vector<int> edges = {4, 8, 16, 32, 64, 128, 256, 512};  // bucket upper edges, ascending
  int iterations = 300;           // full-batch Adam steps; default 300
  double learning_rate = 0.05;    // Adam step size; default 0.05
  double l2 = 1e-4;               // L2 penalty on every weight (λ/2 ||W||²); default 1e-4
  Status validate() const;        // InvalidArgument naming the field
};

// Softmax regression on sparse rows, the trainer LengthModel uses (exposed for tests): weights
// K x cols, row-major, from full-batch Adam (β1 0.9, β2 0.999, ε 1e-8) on
//   mean_i -log softmax(W x_i)[y_i] + l2/2 Σ W², starting from zero.
std::vector<double> train_softmax(const std::vector<SparseRow>& x, const std::vector<int>& y, int classes, uint32_t cols,
                                  int iterations, double learning_rate, double l2);

class LengthModel {
 public:
  // Fits a head on `samples` (at least one). InvalidArgument for bad options or no samples.
  [[nodiscard]] static Result<std::shared_ptr<const LengthModel>> train(const std::vector<LengthSample>& samples,
                                                                       const LengthTrainOptions& opts);
  // Reads a model file. InvalidArgument naming the line for a malformed file, NotFound / IOError
  // when it cannot be read.
  [[nodiscard]] static Result<std::shared_ptr<const LengthModel>> load(const std::string& path);
  [[nodiscard]] static Result<std::shared_ptr<const LengthModel>> parse(const std::string& text);
  // Writes the model file (atomically: a temp file renamed over `path`).
  [[nodiscard]] Status save(const std::string& path) const;
  std::string serialize() const;

  int buckets() const { return static_cast<int>(means_.size()); }
  const std::vector<int>& edges() const { return edges_; }
  // Bucket of a length: the first k with length <= edges[k], else the last.
  int bucket_of(int length) const;

  // Bucket probabilities (sum 1).
  std::vector<double> probabilities(const LengthFeatures& f) const;
  // E[L - g | L > g] under `probs` (see above), clamped to [1, max(1, max_tokens - g)].
  double remaining(const std::vector<double>& probs, int generated, int max_tokens) const;
  double remaining(const LengthFeatures& f, int generated) const {
    return remaining(probabilities(f), generated, f.max_tokens);
  }

 private:
  LengthModel() = default;
  uint32_t dim_ = 0;
  std::vector<int> edges_;
  std::vector<double> means_, maxima_;
  std::vector<float> weights_;  // buckets x (kLengthDenseFeatures + dim_), row-major
};

}  // namespace ragd::pipelines
