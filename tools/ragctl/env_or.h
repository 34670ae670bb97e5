// ragctl's defaults from the environment: `$NAME` when set and not empty, else `fallback`
// (RAGD_DATA for --data, RAGD_MODEL for --model).
// Thread-safety: reads the environment; call it while no thread changes it.
#pragma once

#include <cstdlib>
#include <string>

namespace ragd::tools {

inline std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

}  // namespace ragd::tools
