// Thread count shared by the OpenMP kernels and OpenBLAS.
// Thread-safety: set_num_threads() changes process-wide state; call it once at start-up.
#pragma once

namespace ragd::kernels {

// n <= 0: leave the OpenMP / OpenBLAS defaults (all cores).
void set_num_threads(int n);
int num_threads();

}  // namespace ragd::kernels
