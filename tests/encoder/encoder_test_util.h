// Helpers for the encoder tests: temp directories, files, and running the Python reference.
#pragma once

#include <cstdlib>
#include <filesystem>
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

}  // namespace ragd::encoder_testing
