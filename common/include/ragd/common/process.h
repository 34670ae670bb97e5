// Process start-up helpers shared by the ragd and ragctl executables.
// Thread-safety: call from main() before any other thread exists.
#pragma once

#include <cstddef>

namespace ragd {

// Resident set size of this process in bytes (/proc/self/statm); 0 where unavailable. Any thread.
size_t resident_bytes();

// OpenMP's default spin-waiting makes compute threads fight everything else on a busy or small
// machine (measured: 9.7 vs 1087 tokens/s for the tiny model on 2 shared cores). libgomp reads
// OMP_WAIT_POLICY once, when it is loaded, so setting it later in main() has no effect: when the
// variable is unset this re-executes the current binary with OMP_WAIT_POLICY=PASSIVE. A value the
// user set is kept. Returns normally (no re-exec) if the variable is set or exec fails.
void ensure_passive_omp_wait(char** argv);

}  // namespace ragd
