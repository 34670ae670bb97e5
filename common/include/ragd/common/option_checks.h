// The range and enum checks every module's Options::validate() writes its messages with, so that
// a setting refused by its module reads the same wherever it is checked (the daemon's config,
// open_runtime, a tool): "runtime.max_running: must be > 0, got 0",
// "runtime.kv_dtype: value code 1 is not one of f32 | bf16 | int8".
// Header-only, so an options library checks without linking anything.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"

namespace ragd {

// v >= lo; the message says "> 0" for lo = 1.
inline Status check_at_least(std::string_view key, int64_t v, int64_t lo) {
  if (v >= lo) return Status::OK();
  return Status::InvalidArgument(std::string(key) + ": must be " + (lo == 1 ? std::string("> 0") : ">= " + std::to_string(lo)) +
                                 ", got " + std::to_string(v));
}

// An enum field holds a value of its name table (not a cast of some other code).
template <typename E>
Status check_enum_known(std::string_view key, E v) {
  if (enum_known(v)) return Status::OK();
  return Status::InvalidArgument(std::string(key) + ": value code " + std::to_string(static_cast<int>(v)) +
                                 " is not one of " + enum_choices<E>());
}

}  // namespace ragd
