// A `ragctl bench --json` result as the requests a simulation replays (`ragctl simulate --workload
// trace:BENCH.json`): each finished request with usage, its measured prompt and answer lengths, sent
// when the bench sent it — its recorded `sent_s` — or, in files without it, at the arrivals
// `ragctl bench --rate R --seed S` draws (std::exponential_distribution over std::mt19937_64(S), a
// fresh engine per run; S the run's recorded seed, else `fallback_seed`; a closed-loop run at its
// achieved rate). Runs follow each other: a run starts where the previous one's last request was
// sent. Every request is a retrieval; without retrieved lists it has no document ids.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench_report.h"
#include "ragd/common/status.h"
#include "ragd/sim/workload.h"

namespace ragd::tools {

[[nodiscard]] Result<std::vector<sim::SimRequest>> trace_requests(const BenchResult& bench, const std::string& source,
                                                                  uint64_t fallback_seed);

}  // namespace ragd::tools
