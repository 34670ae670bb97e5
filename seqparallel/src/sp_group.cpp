#include "ragd/seqparallel/sp_group.h"

#include <string>
#include <thread>
#include <vector>

#include "ragd/kernels/threads.h"
#include "ragd/seqparallel/nccl_communicator.h"
#include "ragd/seqparallel/thread_communicator.h"

namespace ragd::seqparallel {

namespace {

class LocalGroup final : public SpGroup {
 public:
  ~LocalGroup() override {
    if (driver_ != nullptr) (void)driver_->shutdown();
    for (auto& t : helpers_) {
      if (t.joinable()) t.join();
    }
  }
  SpDriver& driver() override { return *driver_; }

  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<std::thread> helpers_;
  std::unique_ptr<SpDriver> driver_;
};

class CommGroup final : public SpGroup {
 public:
  CommGroup(engine::Model& m, std::unique_ptr<Communicator> c, PartitionKind k)
      : comm_(std::move(c)), driver_(std::make_unique<SpDriver>(m, *comm_, k)) {}
  ~CommGroup() override { (void)driver_->shutdown(); }
  SpDriver& driver() override { return *driver_; }

 private:
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<SpDriver> driver_;
};

// With kNccl, replaces the threads transport rank *comm by an NCCL rank bootstrapped over it
// (every rank of the group calls this at the same time). On failure *comm is left null and the
// bootstrap has been aborted, so the other ranks fail too.
Status join_transport(SpTransport transport, std::unique_ptr<Communicator>* comm) {
  if (transport == SpTransport::kHost) return Status::OK();
  auto n = make_nccl_communicator(std::move(*comm));
  if (!n.ok()) return n.status();
  *comm = std::move(n).value();
  return Status::OK();
}

}  // namespace

Result<std::unique_ptr<SpGroup>> start_local_group(int workers, engine::Model& rank0, const ModelLoader& load_model,
                                                   PartitionKind kind, int threads_per_worker, SpTransport transport,
                                                   const SpillOptions& spill) {
  if (workers < 1) return Status::InvalidArgument("sequence-parallel group: needs at least 1 worker, got " + std::to_string(workers));
  auto g = std::make_unique<LocalGroup>();
  RAGD_ASSIGN_OR_RETURN(g->comms, make_thread_group(workers));
  for (int r = 1; r < workers; ++r) {
    std::unique_ptr<Communicator>* slot = &g->comms[r];
    g->helpers_.emplace_back([slot, transport, load_model, kind, threads_per_worker, spill] {
      if (Status st = join_transport(transport, slot); !st.ok()) return;  // the bootstrap is aborted: rank 0 fails
      Communicator* comm = slot->get();
      kernels::set_num_threads(std::max(1, threads_per_worker));
      auto m = load_model();
      if (!m.ok()) {
        comm->abort(m.status().with_context("sequence-parallel worker " + std::to_string(comm->rank()) + " could not load the model"));
        return;
      }
      Status st = comm->barrier();
      if (st.ok()) st = serve(*m.value(), *comm, kind, spill);
    });
  }
  Status st = join_transport(transport, &g->comms[0]);
  if (st.ok()) st = g->comms[0]->barrier();
  if (!st.ok()) {
    for (auto& t : g->helpers_) t.join();
    g->helpers_.clear();
    return st;
  }
  g->driver_ = std::make_unique<SpDriver>(rank0, *g->comms[0], kind);
  g->driver_->set_spill(spill);
  return std::unique_ptr<SpGroup>(std::move(g));
}

Result<std::unique_ptr<SpGroup>> join_group(engine::Model& rank0, std::unique_ptr<Communicator> comm, PartitionKind kind) {
  if (comm == nullptr || comm->rank() != 0) return Status::InvalidArgument("join_group: needs rank 0 of a communicator");
  RAGD_RETURN_IF_ERROR(comm->barrier());
  return std::unique_ptr<SpGroup>(new CommGroup(rank0, std::move(comm), kind));
}

Status serve_after_barrier(engine::Model& model, Communicator& comm, PartitionKind kind, const SpillOptions& spill) {
  RAGD_RETURN_IF_ERROR(comm.barrier());
  return serve(model, comm, kind, spill);
}

}  // namespace ragd::seqparallel
