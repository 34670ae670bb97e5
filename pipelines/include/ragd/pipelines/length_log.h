// The length log: one JSON object per finished run, what a length head is trained on
// (`ragctl length-train`). Written by the executor when runtime.length_log names a file:
//   {"pipeline": "default", "prompt_tokens": 312, "max_tokens": 512, "output_tokens": 87,
//    "finish_reason": "stop", "text": "list the ..."}
// `text` is the user's question (LengthFeatures::text); it is the tenant's data, so the log is off
// by default and stays with the operator (like any request log).
//
// Thread-safety: LengthLogWriter::append is thread-safe (one mutex); parse_length_log is pure.
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/pipelines/length_model.h"

namespace ragd::pipelines {

// One log line (no trailing newline).
std::string length_log_line(const LengthSample& s);

// Every line of a log; blank lines are skipped. InvalidArgument "SOURCE:LINE: ..." for a line that
// is not such an object (missing field, wrong type, negative count).
[[nodiscard]] Result<std::vector<LengthSample>> parse_length_log(std::string_view jsonl, const std::string& source);

class LengthLogWriter {
 public:
  // Opens `path` for appending (created if missing). IOError when it cannot.
  [[nodiscard]] static Result<std::unique_ptr<LengthLogWriter>> open(const std::string& path);
  ~LengthLogWriter();
  LengthLogWriter(const LengthLogWriter&) = delete;
  LengthLogWriter& operator=(const LengthLogWriter&) = delete;
  // Appends one line and flushes it (a crash loses at most the line being written).
  void append(const LengthSample& s);
  long lines() const;

 private:
  explicit LengthLogWriter(std::FILE* f) : f_(f) {}
  mutable std::mutex mu_;
  std::FILE* f_;   // guarded by mu_
  long lines_ = 0;  // guarded by mu_
};

}  // namespace ragd::pipelines
