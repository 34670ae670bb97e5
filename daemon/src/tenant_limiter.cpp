#include "tenant_limiter.h"

namespace ragd::daemon {

int TenantLimiter::limit(const std::string& tenant) const {
  auto it = opts_.tenants.find(tenant);
  if (it != opts_.tenants.end() && it->second.max_concurrent > 0) return it->second.max_concurrent;
  return opts_.max_concurrent_per_tenant;
}

int TenantLimiter::in_use(const std::string& tenant) const {
  std::lock_guard<std::mutex> l(mu_);
  auto it = in_use_.find(tenant);
  return it == in_use_.end() ? 0 : it->second;
}

std::shared_ptr<void> TenantLimiter::acquire(const std::string& tenant) {
  const int lim = limit(tenant);
  {
    std::lock_guard<std::mutex> l(mu_);
    int& n = in_use_[tenant];
    if (n >= lim) return nullptr;
    ++n;
  }
  // The deleter gives the slot back; the pointee is a dummy.
  return std::shared_ptr<void>(new char(0), [this, tenant](void* p) {
    delete static_cast<char*>(p);
    std::lock_guard<std::mutex> l(mu_);
    if (--in_use_[tenant] == 0) in_use_.erase(tenant);
  });
}

}  // namespace ragd::daemon
