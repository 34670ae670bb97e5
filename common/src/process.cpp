#include "ragd/common/process.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

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

namespace {

// The first number in `path` (a limit file reads "max" when there is none: not a number).
bool read_number(const std::string& path, unsigned long long* out) {
  std::ifstream f(path);
  return static_cast<bool>(f >> *out);
}

// The cgroup limit less usage over the process's memory cgroup and its ancestors; false if none.
bool cgroup_headroom(size_t* out) {
  std::ifstream f("/proc/self/cgroup");
  std::string line;
  bool found = false;
  while (std::getline(f, line)) {
    // v2: "0::/path"; v1: "4:memory:/path" (the controller list may name others too).
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    std::string root, limit_file, usage_file;
    if (controllers.empty()) {
      root = "/sys/fs/cgroup", limit_file = "/memory.max", usage_file = "/memory.current";
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      root = "/sys/fs/cgroup/memory", limit_file = "/memory.limit_in_bytes", usage_file = "/memory.usage_in_bytes";
    } else {
      continue;
    }
    for (;;) {
      unsigned long long limit = 0, usage = 0;
      const std::string dir = root + (path == "/" ? "" : path);
      // v1 writes "no limit" as a huge number (2^63 rounded down to a page).
      if (read_number(dir + limit_file, &limit) && limit < (1ull << 62) && read_number(dir + usage_file, &usage)) {
        const size_t left = usage < limit ? static_cast<size_t>(limit - usage) : 0;
        if (!found || left < *out) *out = left;
        found = true;
      }
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
    }
  }
  return found;
}

}  // namespace

AvailableMemory available_memory() {
  AvailableMemory m;
  auto offer = [&](size_t bytes, const char* source) {
    if (m.source.empty() || bytes < m.bytes) m = {bytes, source};
  };
  std::ifstream info("/proc/meminfo");
  std::string key;
  unsigned long long kb = 0;
  while (info >> key >> kb) {
    if (key == "MemAvailable:") {
      offer(static_cast<size_t>(kb) * 1024, "MemAvailable");
      break;
    }
    info.ignore(256, '\n');
  }
  size_t cg = 0;
  if (cgroup_headroom(&cg)) offer(cg, "cgroup memory limit");
  rlimit rl{};
  if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    unsigned long pages_total = 0;
    std::FILE* f = std::fopen("/proc/self/statm", "r");
    if (f != nullptr) {
      if (std::fscanf(f, "%lu", &pages_total) != 1) pages_total = 0;
      std::fclose(f);
    }
    const size_t used = static_cast<size_t>(pages_total) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    offer(rl.rlim_cur > used ? static_cast<size_t>(rl.rlim_cur) - used : 0, "RLIMIT_AS");
  }
  return m;
}

}  // namespace ragd
