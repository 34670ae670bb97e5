// The web console's static files, embedded in the binary at build time (cmake/embed_files.cmake
// generates console_assets.cpp from daemon/console/). Immutable for the life of the process.
#pragma once

#include <string_view>
#include <vector>

namespace ragd::daemon {

struct ConsoleAsset {
  std::string_view name;          // path relative to daemon/console/, e.g. "index.html"
  std::string_view content_type;  // from the file extension
  std::string_view data;          // the file's bytes
  std::string_view etag;          // strong ETag, quoted: "\"<32 hex digits of SHA-256>\""
};

// Every embedded file, in the order the build listed them. Thread-safe (built once).
const std::vector<ConsoleAsset>& console_assets();

}  // namespace ragd::daemon
