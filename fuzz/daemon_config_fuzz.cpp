// The daemon's TOML configuration (configs/ragd.toml): apply_toml on top of the defaults, then the
// cross-field checks, the printed form (--print-config) and a second parse of that printed form.
// An input whose first line is "--set key=value" goes through apply_override instead (the
// command-line path), once per such line.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ragd/daemon/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool quiet = [] { return setenv("RAGD_LOG_LEVEL", "off", 0) == 0; }();
  (void)quiet;
  const std::string text(reinterpret_cast<const char*>(data), size);
  ragd::daemon::DaemonConfig cfg;
  if (text.rfind("--set ", 0) == 0) {
    std::string_view rest(text);
    while (rest.rfind("--set ", 0) == 0) {
      size_t nl = rest.find('\n');
      std::string_view line = rest.substr(6, nl == std::string_view::npos ? std::string_view::npos : nl - 6);
      size_t eq = line.find('=');
      if (eq != std::string_view::npos)
        (void)ragd::daemon::apply_override(cfg, std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
  } else if (!ragd::daemon::apply_toml(cfg, text, "fuzz.toml").ok()) {
    return 0;
  }
  (void)ragd::daemon::validate(cfg);
  std::string host;
  uint16_t port = 0;
  (void)ragd::daemon::parse_listen(cfg.server.listen, &host, &port);
  // What --print-config writes is read again (a rejection there is reported by the tests, not
  // here: only crashes count).
  const std::string printed = ragd::daemon::to_toml(cfg, true);
  ragd::daemon::DaemonConfig again;
  (void)ragd::daemon::apply_toml(again, printed, "printed.toml");
  return 0;
}
