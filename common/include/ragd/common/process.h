// Process start-up helpers shared by the ragd and ragctl executables.
// Thread-safety: call from main() before any other thread exists.
#pragma once

#include <cstddef>
#include <string>

namespace ragd {

// Resident set size of this process in bytes (/proc/self/statm); 0 where unavailable. Any thread.
size_t resident_bytes();

// Memory this process can still take, in bytes, and what limits it: the least of the machine's
// MemAvailable (/proc/meminfo), its cgroup's limit less its usage (v2 memory.max / memory.current
// or v1 memory.limit_in_bytes / memory.usage_in_bytes, the cgroup and its ancestors) and
// RLIMIT_AS less the address space in use. `source` names the one that gave `bytes` ("MemAvailable",
// "cgroup memory limit", "RLIMIT_AS"); bytes = 0 and source "" when none can be read. Any thread.
struct AvailableMemory {
  size_t bytes = 0;
  std::string source;
};
AvailableMemory available_memory();

// OpenMP's default spin-waiting makes compute threads fight everything else on a busy or small
// machine (measured: 9.7 vs 1087 tokens/s for the tiny model on 2 shared cores). libgomp reads
// OMP_WAIT_POLICY once, when it is loaded, so setting it later in main() has no effect: when the
// variable is unset this re-executes the current binary with OMP_WAIT_POLICY=PASSIVE and, unless
// GOMP_SPINCOUNT is set, GOMP_SPINCOUNT=10000: idle threads spin about 0.1 ms before they sleep.
// The kernels of one step follow each other closely, and a futex wake-up per parallel region cost
// a 93-row EPIC step up to a quarter of its time (bench_blend: 4.6× against full prefill with no spin,
// 5.0-6.6× with it) and 2-thread decode 1.4-1.7×; 0.1 ms is short enough not to starve other work. A
// value the user set is kept. Returns normally (no re-exec) if the variable is set or exec fails.
void ensure_passive_omp_wait(char** argv);

}  // namespace ragd
