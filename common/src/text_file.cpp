#include "ragd/common/text_file.h"

#include <fstream>
#include <sstream>

namespace ragd {

Result<std::string> read_text_file(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open " + std::string(what));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status::IOError(path + ": read failed");
  return ss.str();
}

}  // namespace ragd
