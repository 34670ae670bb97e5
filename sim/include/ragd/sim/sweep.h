// Sweeps: one simulation per value of one key (`--sweep rate=1..64`), and the keys a sweep (or a
// command-line override) may set on the simulated fleet.
//
// Forms: "key=a..b" doubles from a to b (a > 0; b is included as the last point when the doubling
// passes it), "key=a..b:s" steps linearly by s, "key=v1,v2,..." lists values. Numbers may carry a
// byte suffix (KiB, MiB, GiB, TiB, or K/M/G/T as powers of 1024) for byte keys. At most 64 points.
// Fleet keys: replicas, router, scheduler, eviction, max_running, max_batch_tokens, kv_pool_bytes,
// hbm_cache_bytes, dram_cache_bytes, ssd_cache_bytes, remote_bytes, retrieval_threads, max_queue,
// preemption, max_concurrent_per_tenant; every workload key (workload.h) too.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/sim/cost_model.h"
#include "ragd/sim/simulator.h"
#include "ragd/sim/workload.h"

namespace ragd::sim {

struct Sweep {
  std::string key;
  std::vector<std::string> values;  // as given or generated ("1", "2", "4", ...)
};

// Parses "key=..." (see above). InvalidArgument naming the sweep and the problem.
[[nodiscard]] Result<Sweep> parse_sweep(std::string_view text);

// "256MiB", "1G", "1073741824" -> bytes. InvalidArgument naming `key`.
[[nodiscard]] Result<uint64_t> parse_bytes(std::string_view key, std::string_view value);

// Sets a fleet key on `opts` (kv_pool_bytes needs the model shape for the block size).
[[nodiscard]] Status apply_sim_key(SimOptions& opts, const ModelShape& shape, std::string_view key, std::string_view value);
bool is_sim_key(std::string_view key);

// Sets `key` wherever it belongs (fleet or workload); unknown keys are refused naming the key.
[[nodiscard]] Status apply_key(SimOptions& opts, WorkloadSpec& spec, const ModelShape& shape, std::string_view key,
                               std::string_view value);

}  // namespace ragd::sim
