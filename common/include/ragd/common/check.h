// RAGD_CHECK: broken invariants abort with a message; they never limp on.
//   RAGD_CHECK(n <= capacity) << "n=" << n;
// Thread-safety: safe from any thread.
#pragma once

#include <sstream>

namespace ragd::detail {

class CheckFailure {
 public:
  CheckFailure(const char* cond, const char* file, int line);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};

}  // namespace ragd::detail

#define RAGD_CHECK(cond) \
  if (__builtin_expect(!!(cond), 1)) {} else ::ragd::detail::CheckFailure(#cond, __FILE__, __LINE__)
