// RemoteOptions::validate: pure, in the options library (no hiredis, no OpenSSL), so that the
// daemon's whole-config check runs it without linking the tier.
#include <fmt/format.h>

#include "ragd/kvstore/redis_client.h"
#include "ragd/kvstore/remote_tier.h"

namespace ragd::kvstore {

Status RemoteOptions::validate() const {
  if (url.empty()) return Status::OK();
  RAGD_RETURN_IF_ERROR(parse_redis_urls(url).status());
  if (timeout_ms < 1 || timeout_ms > 60000)
    return Status::InvalidArgument(fmt::format("kvstore.remote.timeout_ms must be in 1..60000, got {}", timeout_ms));
  if (max_value_bytes < (64u << 10) || max_value_bytes > (512ull << 20))
    return Status::InvalidArgument(
        fmt::format("kvstore.remote.max_value_bytes must be in 65536..536870912 (Redis's value limit), got {}", max_value_bytes));
  if (write_queue_bytes == 0) return Status::InvalidArgument("kvstore.remote.write_queue_bytes must be positive");
  if (ttl_s < 0) return Status::InvalidArgument(fmt::format("kvstore.remote.ttl_s must be >= 0, got {}", ttl_s));
  if (breaker_backoff_ms < 1) return Status::InvalidArgument("kvstore.remote.breaker_backoff_ms must be positive");
  if (key_prefix.find_first_of("{}") != std::string::npos)
    return Status::InvalidArgument("kvstore.remote key prefix must not contain '{' or '}' (the segment key is the hash tag)");
  if (secret_file.empty() && !trust_unauthenticated)
    return Status::InvalidArgument(
        "kvstore.remote: values read from Redis go into prompts, so they must be authenticated: set "
        "kvstore.remote.secret_file (the fleet secret, the same file on every replica; e.g. `openssl rand -hex 32 > "
        "fleet.key`), or set kvstore.remote.trust_unauthenticated = true for a Redis that no one else can write to "
        "(docs/design/remote-kv.md)");
  if (!username.empty() && password_file.empty())
    return Status::InvalidArgument("kvstore.remote.username needs kvstore.remote.password_file");
  return Status::OK();
}

}  // namespace ragd::kvstore
