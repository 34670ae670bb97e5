// Named loggers per module (spdlog). Usage: ragd::log::engine()->info("loaded {} tensors", n);
// Level from RAGD_LOG_LEVEL (trace|debug|info|warn|error|off), default info; logs go to stderr.
// Thread-safety: loggers are thread-safe.
#pragma once

#include <memory>

#include <spdlog/spdlog.h>

namespace ragd::log {

std::shared_ptr<spdlog::logger> get(const char* name);
inline std::shared_ptr<spdlog::logger> engine() { return get("engine"); }
inline std::shared_ptr<spdlog::logger> kernels() { return get("kernels"); }
inline std::shared_ptr<spdlog::logger> kvstore() { return get("kvstore"); }
inline std::shared_ptr<spdlog::logger> retrieval() { return get("retrieval"); }
inline std::shared_ptr<spdlog::logger> pipelines() { return get("pipelines"); }
inline std::shared_ptr<spdlog::logger> seqparallel() { return get("seqparallel"); }
inline std::shared_ptr<spdlog::logger> daemon() { return get("daemon"); }
inline std::shared_ptr<spdlog::logger> tools() { return get("ragctl"); }

}  // namespace ragd::log
