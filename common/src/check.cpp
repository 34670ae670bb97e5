#include "ragd/common/check.h"

#include <cstdio>
#include <cstdlib>

namespace ragd::detail {

CheckFailure::CheckFailure(const char* cond, const char* file, int line) {
  os_ << file << ":" << line << ": check failed: " << cond << " ";
}

CheckFailure::~CheckFailure() {
  std::string msg = os_.str();
  std::fprintf(stderr, "FATAL %s\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ragd::detail
