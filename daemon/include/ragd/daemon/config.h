// Daemon configuration: one TOML file (configs/ragd.toml), command-line overrides, and the
// effective config printed back as TOML (`ragd --print-config`).
//
// Every option lives in one table of dotted keys ("server.listen", "runtime.max_running", ...)
// that drives parsing, overrides and printing, so the three can never disagree. Enum-valued keys
// (runtime.kv_dtype, runtime.scheduler, ...) are parsed into their enums right here, with the
// enum's one name table: an unknown name is an error naming the key and the choices, and
// --print-config prints the names the runtime will use. Removed keys (runtime.index_spec) are
// errors that say what to use instead.
// Precedence: built-in defaults < config file < flags.
// Thread-safety: value types; the functions are pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ragd/common/log.h"
#include "ragd/common/status.h"
#include "ragd/pipelines/runtime_options.h"

namespace ragd::daemon {

struct ServerOptions {
  std::string listen = "127.0.0.1:8080";  // host:port; port 0 = pick a free port
  int threads = 0;                         // io_context threads; 0 = hardware concurrency (min 2)
  size_t max_body_bytes = 8u << 20;        // request body limit; default 8 MiB (413 above)
  size_t max_header_bytes = 16u << 10;     // request header limit; default 16 KiB (431 above)
  int first_byte_timeout_ms = 5000;        // a new connection's first bytes must come within this; 5 s
  int read_timeout_ms = 30000;             // whole-request read deadline once its first bytes came
                                           // (408 when it passes); default 30 s
  int write_timeout_ms = 30000;            // per-write deadline; default 30 s
  int idle_timeout_ms = 60000;             // keep-alive idle deadline between requests; default 60 s
  // Open connections; at the cap new ones get only /healthz and /readyz (others 503
  // too_many_connections). Lowered at start to the open-file limit less 96. Default 1024.
  int max_connections = 1024;
  int max_connections_per_client = 256;    // the same cap per client address; 0 = none; default 256
  int stream_queue_limit = 1024;           // queued outgoing messages per stream before disconnect
  int ws_ping_interval_ms = 20000;         // WebSocket ping period; default 20 s
  int shutdown_deadline_ms = 10000;        // graceful stop: in-flight requests get this long
  // /metrics: false (default) = open to anyone, operational metrics only unless an admin key is
  // sent; true = any valid API key is needed (401 without). Cache contents (KV tiers, reuse, the
  // executor's stats) need an admin key (or auth off) either way. true needs API keys configured.
  bool metrics_require_key = false;
};

struct TenantLimit {
  int max_concurrent = 0;  // 0 = limits.max_concurrent_per_tenant
};

struct AuthOptions {
  // API key -> tenant. Empty, with no admin keys = auth disabled (every request is tenant
  // "default" with operator rights).
  std::map<std::string, std::string> keys;
  // Admin API key -> tenant: operator rights (write and delete shared documents, full
  // /v1/cache/stats) on top of the tenant's own.
  std::map<std::string, std::string> admin_keys;
};

struct LimitOptions {
  int max_concurrent_per_tenant = 64;  // concurrent runs/completions per tenant (429 above)
  int retry_after_s = 1;               // Retry-After header on 429
  std::map<std::string, TenantLimit> tenants;  // per-tenant overrides
};

struct DaemonConfig {
  ServerOptions server;
  pipelines::RuntimeOptions runtime;
  AuthOptions auth;
  LimitOptions limits;
  log::Level log_level = log::Level::kInfo;  // trace | debug | info | warn | error | off
};

// Parses TOML text on top of `cfg` (so defaults survive for absent keys). Unknown keys and wrong
// types are errors naming the key: "ragd.toml: server.threads: expected integer, got string".
[[nodiscard]] Status apply_toml(DaemonConfig& cfg, const std::string& toml_text,
                                const std::string& source_name = "config");
[[nodiscard]] Status load_config_file(DaemonConfig& cfg, const std::string& path);

// One "key=value" override from the command line (`--set server.threads=4`); value parsed by
// the key's type. Also used by the named flags (--listen, --model, ...).
[[nodiscard]] Status apply_override(DaemonConfig& cfg, const std::string& key, const std::string& value);

// One --api-key / --admin-key flag ("KEY=TENANT") into [auth.keys] / [auth.admin_keys]. Refused:
// no '=' or an empty side; a key the table already maps to another tenant (the message names the
// key by its first 4 characters only).
[[nodiscard]] Status apply_key_flag(DaemonConfig& cfg, bool admin, const std::string& key_eq_tenant);

// Checks cross-field constraints (ranges, listen address; the [runtime] table through
// RuntimeOptions::validate, the check open_runtime runs). Names the key on failure. apply_toml
// runs the checks one source can answer alone; call this on the whole config once flags (API keys
// included) are applied: it also refuses server.metrics_require_key without any API key and a key
// in both [auth.keys] and [auth.admin_keys] (named by its first 4 characters, never in full).
[[nodiscard]] Status validate(const DaemonConfig& cfg);

// The effective config as TOML (API keys are masked unless show_secrets).
std::string to_toml(const DaemonConfig& cfg, bool show_secrets = false);

// "host:port" -> parts. Port must be 0..65535.
[[nodiscard]] Status parse_listen(const std::string& listen, std::string* host, uint16_t* port);

// Names of every scalar key in the option table (for docs and tests).
std::vector<std::string> config_keys();

}  // namespace ragd::daemon
