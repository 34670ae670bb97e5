// Whole small files (configs, JSON descriptions) read into a string, or written from one.
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>

#include "ragd/common/status.h"

namespace ragd {

// The bytes of `path`. NotFound "<path>: cannot open <what>" when it cannot be opened; IOError when
// reading fails part way.
Result<std::string> read_text_file(const std::string& path, std::string_view what = "file");

// Writes `text` as the whole of `path` (created or truncated). IOError "<path>: write failed".
Status write_text_file(const std::string& path, std::string_view text);

}  // namespace ragd
