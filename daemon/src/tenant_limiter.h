// Per-tenant concurrency limits: acquire() hands out a slot (released when the last copy of the
// returned pointer goes) or nullptr when the tenant is at its limit.
// Thread-safety: thread-safe. The limiter must outlive its slots.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "ragd/daemon/config.h"

namespace ragd::daemon {

class TenantLimiter {
 public:
  explicit TenantLimiter(const LimitOptions& opts) : opts_(opts) {}
  std::shared_ptr<void> acquire(const std::string& tenant);
  int limit(const std::string& tenant) const;
  int in_use(const std::string& tenant) const;

 private:
  LimitOptions opts_;
  mutable std::mutex mu_;
  std::map<std::string, int> in_use_;  // guarded by mu_
};

}  // namespace ragd::daemon
