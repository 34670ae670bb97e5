// API keys -> tenants, request ids, tenant concurrency slots.
#include <cctype>
#include <cstdio>

#include <strings.h>

#include "api_impl.h"

namespace ragd::daemon {

std::string ApiImpl::new_request_id(const HttpRequest* req) {
  if (req) {
    const std::string& h = req->header("x-request-id");
    bool ok = !h.empty() && h.size() <= 64;
    for (char c : h) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
    if (ok) return h;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "req-%06llx%06llx", static_cast<unsigned long long>(id_prefix_),
                static_cast<unsigned long long>(next_id_.fetch_add(1) + 1));
  return buf;
}

ApiError ApiImpl::authenticate(const HttpRequest& req, ReqCtx* ctx, bool allow_query_key) const {
  ctx->tenant = "default";
  if (cfg_.auth.keys.empty() && cfg_.auth.admin_keys.empty()) {
    ctx->admin = true;  // no keys: a single-tenant daemon whose callers are its operators
    return {};
  }
  const ApiError missing{401, "unauthorized", "missing API key: send 'Authorization: Bearer <api key>'", "",
                         {{"WWW-Authenticate", "Bearer"}}};
  std::string key;
  const std::string& h = req.header("authorization");
  if (!h.empty()) {
    if (h.size() < 7 || strncasecmp(h.c_str(), "Bearer ", 7) != 0)
      return {401, "unauthorized", "Authorization header must be 'Bearer <api key>'", "", {{"WWW-Authenticate", "Bearer"}}};
    key = h.substr(7);
    while (!key.empty() && key.front() == ' ') key.erase(key.begin());
  } else {
    // Browsers cannot set headers on WebSocket upgrades: accept ?api_key= there, and only there
    // (keys in URLs end up in proxy and access logs).
    auto pos = req.query.find("api_key=");
    if (pos != std::string::npos && (pos == 0 || req.query[pos - 1] == '&')) {
      if (!allow_query_key)
        return {401, "unauthorized", "?api_key= is accepted only on /v1/stream; send 'Authorization: Bearer <api key>'",
                "", {{"WWW-Authenticate", "Bearer"}}};
      auto end = req.query.find('&', pos);
      bool ok = false;
      key = percent_decode(req.query.substr(pos + 8, end == std::string::npos ? std::string::npos : end - pos - 8), &ok);
      if (!ok) key.clear();
    }
  }
  if (key.empty()) return missing;
  if (auto it = cfg_.auth.admin_keys.find(key); it != cfg_.auth.admin_keys.end()) {
    ctx->tenant = it->second;
    ctx->authed_by_key = true;
    ctx->admin = true;
    return {};
  }
  auto it = cfg_.auth.keys.find(key);
  if (it == cfg_.auth.keys.end()) return {401, "unauthorized", "invalid API key", "", {{"WWW-Authenticate", "Bearer"}}};
  ctx->tenant = it->second;
  ctx->authed_by_key = true;
  return {};
}

ApiError ApiImpl::metrics_access(const HttpRequest& req, bool* full) const {
  *full = false;
  ReqCtx ctx;
  if (ApiError e = authenticate(req, &ctx, false); e.failed()) {
    const bool sent = !req.header("authorization").empty() || req.query.find("api_key=") != std::string::npos;
    if (sent || cfg_.server.metrics_require_key) return e;
    return {};  // anonymous: operational metrics only
  }
  *full = ctx.admin;
  return {};
}

ApiError ApiImpl::acquire_slot(const std::string& tenant, std::shared_ptr<void>* slot) {
  *slot = limiter_.acquire(tenant);
  if (*slot) return {};
  return {429, "rate_limited",
          "tenant '" + clip_input(tenant) + "' is at its limit of " + std::to_string(limiter_.limit(tenant)) + " concurrent requests",
          "", {{"Retry-After", std::to_string(cfg_.limits.retry_after_s)}}};
}

}  // namespace ragd::daemon
