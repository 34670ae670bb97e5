// Helpers for the encoder tests: temp directories, files, and running the Python reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <vector>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "ragd/common/json_writer.h"

namespace ragd::encoder_testing {

inline std::filesystem::path temp_dir(const std::string& tag) {
  auto p = std::filesystem::temp_directory_path() / ("ragd_encoder_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

inline void write_file(const std::filesystem::path& p, const std::string& text) {
  std::ofstream o(p, std::ios::binary);
  o << text;
}

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `bert_reference.py args...`; returns its exit status (77: the reference skipped, e.g. no
// torch; -1: no python3).
inline int run_reference(const std::string& args) {
  if (std::system("/usr/bin/python3 -c 'import json' >/dev/null 2>&1") != 0) return -1;
  const std::string cmd = std::string("/usr/bin/python3 ") + RAGD_ENCODER_REFERENCE + " " + args;
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

inline std::string quote_arg(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

// Runs `bert_reference.py args...`, which writes `ref_bin` (little-endian f32, as many values as
// `got`), and returns the largest |got - reference|; nullopt when the reference skipped (no python3
// or no torch). Another exit status or a size mismatch fails the calling test and returns +inf.
inline std::optional<double> reference_max_delta(const std::string& args, const std::filesystem::path& ref_bin,
                                                 const std::vector<float>& got) {
  const int rc = run_reference(args);
  if (rc == 77 || rc == -1) return std::nullopt;
  const double fail = std::numeric_limits<double>::infinity();
  if (rc != 0) {
    ADD_FAILURE() << "bert_reference.py " << args << " exited with " << rc;
    return fail;
  }
  const std::string ref = read_file(ref_bin);
  if (ref.size() != got.size() * sizeof(float)) {
    ADD_FAILURE() << ref_bin << " holds " << ref.size() << " bytes, expected " << got.size() * sizeof(float);
    return fail;
  }
  const float* r = reinterpret_cast<const float*>(ref.data());
  double m = 0;
  for (size_t i = 0; i < got.size(); ++i) m = std::max(m, std::abs(static_cast<double>(got[i]) - r[i]));
  return m;
}

}  // namespace ragd::encoder_testing
