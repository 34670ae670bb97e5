// Client input quoted back: in an error message, a Status text, a log line.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ragd {

// The documented cap (docs/api.md, "Errors") on one quoted client value.
inline constexpr size_t kEchoMaxBytes = 128;
// The cap on a whole message that quotes a few clipped values, or a module's Status text passed on
// (to a client or a log line) that may quote one not clipped where it was made.
inline constexpr size_t kEchoMessageMaxBytes = 1024;

// A client-supplied value (a model, pipeline or document name, a field name, a path, a tenant, a
// document id) as a message or log line quotes it: at most `max_bytes` of it, cut on a UTF-8
// character boundary, then "…" and the original length, e.g. "aaaa…(1048576 bytes)". Input within
// the cap comes back as it is. Every place that echoes a client value goes through this, so that a
// 4 MiB value costs a short body and a short log line instead of a copy of itself each time.
std::string clip_input(std::string_view s, size_t max_bytes = kEchoMaxBytes);

}  // namespace ragd
