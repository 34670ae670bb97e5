// Whole small files (configs, JSON descriptions) read into a string.
// Thread-safety: pure function.
#pragma once

#include <string>
#include <string_view>

#include "ragd/common/status.h"

namespace ragd {

// The bytes of `path`. NotFound "<path>: cannot open <what>" when it cannot be opened; IOError when
// reading fails part way.
Result<std::string> read_text_file(const std::string& path, std::string_view what = "file");

}  // namespace ragd
