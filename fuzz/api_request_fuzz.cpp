// Every route of the daemon's Api with an arbitrary request: path matching and percent-decoding,
// auth headers, query strings, and every JSON body the daemon parses into typed structs (pipeline
// runs, OpenAI chat / completions / embeddings, documents). The transport is left out (see
// http_request_fuzz.cpp): the request arrives as the server hands it to the Api.
//
// Input framing (not a parser under test, only a way to lay out the request):
//   METHOD TARGET\n
//   name: value\n ...      optional headers, up to an empty line
//   \n
//   body...
// A request carrying an Authorization header goes to an Api with API keys on ("k-tenant",
// "k-admin"), any other to one with auth off, so that mutated bodies need no valid key.
//
// Besides crashes, one resource bound is checked: a request must not add a metric series of its
// own. A method outside the standard ones (Beast accepts any token as a method) must not show up
// as a label value of ragd_http_requests_total (they all count as "other"), or every distinct method a client sends would grow
// the registry and /metrics for the life of the process.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>

#include "daemon_support.h"

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

ragd::daemon::HttpRequest frame_request(std::string_view in) {
  ragd::daemon::HttpRequest req;
  auto next_line = [&in]() {
    size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };
  std::string_view first = next_line();
  size_t sp = first.find(' ');
  req.method = std::string(first.substr(0, sp));
  req.target = sp == std::string_view::npos ? "/" : std::string(first.substr(sp + 1));
  size_t q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string::npos) req.query = req.target.substr(q + 1);
  while (!in.empty()) {
    std::string_view line = next_line();
    if (line.empty()) break;
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    auto [it, inserted] = req.headers.emplace(lower(line.substr(0, colon)), std::string(value));
    if (!inserted) it->second += ", " + std::string(value);
  }
  req.body = std::string(in);
  req.remote = "127.0.0.1:40000";
  req.keep_alive = true;
  return req;
}

bool standard_method(const std::string& m) {
  for (const char* s : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "CONNECT", "TRACE"})
    if (m == s) return true;
  return false;
}

// True for a method that would be written into a label as is (no escaping needed).
bool plain_token(const std::string& m) {
  if (m.empty() || m.size() > 64) return false;
  for (unsigned char c : m)
    if (!std::isalnum(c) && c != '-' && c != '_') return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto req = frame_request(std::string_view(reinterpret_cast<const char*>(data), size));
  const bool auth = req.headers.count("authorization") > 0;
  const std::string method = req.method;
  auto& api = ragd::fuzz::fuzz_api(auth);
  if (ragd::fuzz::handle_and_wait(api, std::move(req)) == 0) {
    std::fprintf(stderr, "api_request: no answer within the deadline\n");
    std::abort();
  }
  // "other" is the label the daemon gives every non-standard method.
  if (!standard_method(method) && method != "other" && plain_token(method)) {
    const std::string needle = "method=\"" + method + "\"";
    if (api.metrics().render().find(needle) != std::string::npos) {
      std::fprintf(stderr, "api_request: method '%s' became a metric label value (unbounded series)\n", method.c_str());
      std::abort();
    }
  }
  return 0;
}
