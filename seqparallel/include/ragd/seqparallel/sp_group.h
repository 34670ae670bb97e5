// A standing sequence-parallel group for a server: rank 0's SpDriver (sp_service.h) plus the
// ranks that serve it. Either helper threads in this process, each with its own copy of the model
// and its own KV pool (`ragd --sp-workers N`), or the other ranks of an MPI job that run serve()
// themselves (`mpirun -np N ragd`).
//
// Thread-safety: the driver is used by one thread (the engine's scheduler thread); the destructor
// shuts the group down (serve() loops return) and joins the helper threads.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/seqparallel/communicator.h"
#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/sp_service.h"

namespace ragd::seqparallel {

class SpGroup {
 public:
  virtual ~SpGroup() = default;
  virtual SpDriver& driver() = 0;
  int workers() { return driver().workers(); }
};

using ModelLoader = std::function<Result<std::unique_ptr<engine::Model>>()>;

// How the workers' KV blocks and partial states travel: through host memory (threads in one
// process, or MPI between ranks), or through NCCL (one GPU per worker; nccl_communicator.h),
// bootstrapped over the former.
enum class SpTransport : uint8_t { kHost, kNccl };
inline constexpr auto kSpTransportNames =
    make_enum_names<SpTransport>("sp_transport", {{SpTransport::kHost, "host"}, {SpTransport::kNccl, "nccl"}});
constexpr const auto& ragd_enum_names(SpTransport) { return kSpTransportNames; }
static_assert(enum_names_valid(kSpTransportNames));
inline std::string_view sp_transport_name(SpTransport t) { return enum_name(t); }
inline Result<SpTransport> parse_sp_transport(std::string_view name) { return parse_enum<SpTransport>(name); }  // "host" | "nccl"

// workers - 1 helper threads, each loading its model with load_model() on its own thread and
// running with threads_per_worker kernel threads; returns once every helper has loaded (or the
// first load error). rank0 is the caller's model. With kNccl every worker (rank r on device r
// modulo the visible devices) joins an NCCL communicator over the threads transport. workers = 1:
// no helper, rank 0 alone (a long sequence on one worker, chunked, spilling as `spill` says).
// spill: every worker's (rank 0's too).
Result<std::unique_ptr<SpGroup>> start_local_group(int workers, engine::Model& rank0, const ModelLoader& load_model,
                                                   PartitionKind kind, int threads_per_worker,
                                                   SpTransport transport = SpTransport::kHost,
                                                   const SpillOptions& spill = {});

// Rank 0 of a communicator whose other ranks run serve() (an MPI job). Waits at a barrier for
// them (their serve() loops enter it first: see serve_after_barrier()).
Result<std::unique_ptr<SpGroup>> join_group(engine::Model& rank0, std::unique_ptr<Communicator> comm, PartitionKind kind);

// For ranks > 0 of such a job: the barrier join_group() waits at, then serve().
Status serve_after_barrier(engine::Model& model, Communicator& comm, PartitionKind kind, const SpillOptions& spill = {});

}  // namespace ragd::seqparallel
