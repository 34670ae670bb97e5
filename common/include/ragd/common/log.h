// Named loggers per module (spdlog). Usage: ragd::log::engine()->info("loaded {} tensors", n);
// Level from RAGD_LOG_LEVEL (trace|debug|info|warn|error|off), default info; logs go to stderr.
// Thread-safety: loggers are thread-safe.
#pragma once

#include <cstdint>
#include <memory>

#include <spdlog/spdlog.h>

#include "ragd/common/enum_names.h"

namespace ragd::log {

// The log verbosity names of the config (log_level), --log-level and RAGD_LOG_LEVEL.
enum class Level : uint8_t { kTrace, kDebug, kInfo, kWarn, kError, kOff };
inline constexpr auto kLevelNames = make_enum_names<Level>(
    "log_level", {{Level::kTrace, "trace"},
                  {Level::kDebug, "debug"},
                  {Level::kInfo, "info"},
                  {Level::kWarn, "warn"},
                  {Level::kError, "error"},
                  {Level::kOff, "off"}});
constexpr const auto& ragd_enum_names(Level) { return kLevelNames; }
static_assert(enum_names_valid(kLevelNames));
inline spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::kTrace: return spdlog::level::trace;
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: return spdlog::level::err;
    case Level::kOff: return spdlog::level::off;
  }
  return spdlog::level::info;
}

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
