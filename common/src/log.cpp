#include "ragd/common/log.h"

#include <cstdlib>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace ragd::log {

std::shared_ptr<spdlog::logger> get(const char* name) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto l = spdlog::get(name)) return l;
  auto l = spdlog::stderr_color_mt(name);
  const char* lvl = std::getenv("RAGD_LOG_LEVEL");
  l->set_level(lvl ? spdlog::level::from_str(lvl) : spdlog::level::info);
  l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%n] %v");
  return l;
}

}  // namespace ragd::log
