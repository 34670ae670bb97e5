#include "ragd/common/process.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ragd {

void ensure_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  if (std::getenv("GOMP_SPINCOUNT") == nullptr) setenv("GOMP_SPINCOUNT", "10000", 1);
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the default policy.
}

size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long pages_total = 0, pages_resident = 0;
  const int got = std::fscanf(f, "%lu %lu", &pages_total, &pages_resident);
  std::fclose(f);
  if (got != 2) return 0;
  return static_cast<size_t>(pages_resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace ragd
