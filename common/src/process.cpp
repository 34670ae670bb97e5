#include "ragd/common/process.h"

#include <unistd.h>

#include <cstdlib>

namespace ragd {

void ensure_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the default policy.
}

}  // namespace ragd
