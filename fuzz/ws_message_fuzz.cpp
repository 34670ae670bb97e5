// WebSocket /v1/stream client messages: the handler the daemon opens for a connection gets each
// newline-separated piece of the input as one text message ({"type":"run"|"cancel"|"ping", ...}
// with the ragd run body), then the connection closes. Frames themselves are Beast's and are
// reached through http_request_fuzz.cpp (bytes after an upgrade request).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "daemon_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ragd::daemon::HttpRequest up;
  up.method = "GET";
  up.target = up.path = "/v1/stream";
  up.headers["upgrade"] = "websocket";
  up.remote = "127.0.0.1:40001";
  auto out = std::make_shared<ragd::fuzz::CollectingWriter>();
  ragd::daemon::HttpResponse reject;
  auto ws = ragd::fuzz::fuzz_api(false).open_ws(up, out, &reject);
  if (!ws) {
    std::fprintf(stderr, "ws_message: the stream endpoint refused an upgrade (%d)\n", reject.status);
    std::abort();
  }
  while (true) {
    size_t nl = in.find('\n');
    ws->on_text(std::string(in.substr(0, nl)));
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  ws->on_close();
  return 0;
}
