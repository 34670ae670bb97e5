// ragctl curve-keypair [--out PREFIX]: a ZeroMQ CURVE key pair for the KV-event stream
// (docs/design/kv-events.md). The publisher's secret key goes in events.kv_curve_secret_key_file;
// each router's public key goes in the publisher's events.kv_curve_allowed_clients_file, and the
// publisher's public key in the router's CURVE server key setting.
//   without --out   prints "public Z85" and "secret Z85" lines
//   --out PREFIX    writes PREFIX.key (the secret, mode 0600) and PREFIX.pub; refuses to overwrite
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/kvstore/kv_events.h"

namespace ragd::tools {
namespace {

// Creates `path` with `mode` and writes `text`; false (with a message) when it exists or fails.
bool write_new(const std::string& path, const std::string& text, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, mode);
  if (fd < 0) {
    std::perror(("ragctl curve-keypair: " + path).c_str());
    return false;
  }
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  return ::close(fd) == 0 && ok;
}

int run_keypair(const std::string& out) {
  auto kp = kvstore::make_curve_keypair();
  if (!kp.ok()) {
    std::fprintf(stderr, "ragctl curve-keypair: %s\n", kp.status().to_string().c_str());
    return 1;
  }
  if (out.empty()) {
    std::printf("public %s\nsecret %s\n", kp->public_key.c_str(), kp->secret_key.c_str());
    return 0;
  }
  if (!write_new(out + ".key", kp->secret_key + "\n", 0600)) return 1;
  if (!write_new(out + ".pub", kp->public_key + "\n", 0644)) return 1;
  std::printf("wrote %s.key (secret) and %s.pub (public: %s)\n", out.c_str(), out.c_str(), kp->public_key.c_str());
  return 0;
}

Registration reg("curve-keypair", "make a ZeroMQ CURVE key pair (Z85) for the KV-event stream's publisher or a router",
                 [](CLI::App& sub) -> Action {
                   auto out = std::make_shared<std::string>();
                   sub.add_option("--out", *out, "write PREFIX.key (secret, 0600) and PREFIX.pub instead of printing");
                   return [out]() { return run_keypair(*out); };
                 });

}  // namespace
}  // namespace ragd::tools
