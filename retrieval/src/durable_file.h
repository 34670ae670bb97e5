// Writing a file so that a crash leaves either the old or the new contents: temp file, fsync,
// rename, directory fsync. Used for the vector index and for snapshots.
// Thread-safety: a function; concurrent writers of one path must be serialised by the caller.
#pragma once

#include <string>

#include "ragd/common/status.h"

namespace ragd::retrieval {

// IOError naming the file and the failing call.
Status write_file_durably(const std::string& path, const std::string& bytes);

}  // namespace ragd::retrieval
