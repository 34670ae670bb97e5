// GET / and GET /console/{file}: the embedded web console (daemon/console/, see console_assets.h).
//
// Static files need no API key: the page asks for one and sends it with its API calls. Every
// answer carries a strong ETag (If-None-Match -> 304), Cache-Control: no-cache (the browser
// revalidates, so a new daemon build is picked up at once) and headers that confine the page to
// its own origin: scripts, styles and images from 'self' only, fetch/WebSocket to 'self' (ws:/wss:
// for the WebSocket of the same host), no framing, no MIME sniffing, no referrer.
#include "api_impl.h"
#include "console_assets.h"

namespace ragd::daemon {

namespace {
constexpr const char* kConsoleCsp =
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

// True when one of the comma-separated entity tags of If-None-Match is `etag` (or "*").
bool etag_matches(const std::string& if_none_match, std::string_view etag) {
  size_t i = 0;
  while (i < if_none_match.size()) {
    size_t j = if_none_match.find(',', i);
    if (j == std::string::npos) j = if_none_match.size();
    std::string_view t(if_none_match.data() + i, j - i);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    if (t.substr(0, 2) == "W/") t.remove_prefix(2);  // weak comparison, as RFC 9110 asks for GET
    if (t == "*" || t == etag) return true;
    i = j + 1;
  }
  return false;
}
}  // namespace

HttpResponse console_response(const HttpRequest& req, const std::string& name) {
  const ConsoleAsset* asset = nullptr;
  for (const ConsoleAsset& a : console_assets())
    if (a.name == name) asset = &a;
  if (!asset) return to_response({404, "route_not_found", "no console file '" + clip_input(name) + "'", "", {}});
  HttpResponse r;
  r.headers = {{"ETag", std::string(asset->etag)},
               {"Cache-Control", "no-cache"},
               {"Content-Security-Policy", kConsoleCsp},
               {"X-Content-Type-Options", "nosniff"},
               {"X-Frame-Options", "DENY"},
               {"Referrer-Policy", "no-referrer"}};
  r.content_type = std::string(asset->content_type);
  if (etag_matches(req.header("if-none-match"), asset->etag)) {
    r.status = 304;
    return r;
  }
  r.body = std::string(asset->data);
  return r;
}

}  // namespace ragd::daemon
