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

Status write_text_file(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Status::IOError(path + ": write failed");
  return Status::OK();
}

}  // namespace ragd
