// Communicator: how the workers of a sequence-parallel group exchange KV blocks and partial
// attention states. The ring-attention prefill and the sharded decode above it are written once
// against this interface; the transports below it are
//   - threads (thread_communicator.h): workers in one process, one rendezvous copy per message;
//   - MPI (mpi_communicator.h, when MPI is found): one rank per worker, CPU;
//   - NCCL (nccl_communicator.h, when CUDA and NCCL are found): one rank per GPU, device or host
//     buffers, bootstrapped over one of the other two.
//
// Semantics (MPI's, so that every transport can honour them):
//   - point-to-point messages between a (source, destination, tag) triple arrive in the order they
//     were sent; a receive names its source and its exact size (a size mismatch is an error);
//   - isend / irecv return at once; the buffer belongs to the transfer until wait() returns;
//   - collectives (allgather, broadcast, barrier) are called by every rank in the same order.
// A rank that fails calls abort(): every blocked or later operation of the group then returns
// that status, so no rank waits forever for a peer that is gone.
//
// Thread-safety: a Communicator is used by one thread at a time (its worker's thread); the
// threads transport's ranks are used by different threads concurrently, which is what it is for.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

#include "ragd/common/status.h"

namespace ragd::seqparallel {

// One transfer in flight.
class Pending {
 public:
  virtual ~Pending() = default;
  // Blocks until the transfer completed (send: the buffer may be reused; receive: it holds the
  // message). Called once.
  virtual Status wait() = 0;
  // Without blocking for the peer: true once the transfer completed (then wait() returns at
  // once), false while it is still pending; an error as wait() would return it.
  virtual Result<bool> test() = 0;
};
using Request = std::unique_ptr<Pending>;

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string_view transport() const = 0;  // "threads", "mpi", ...

  // Tags >= 0 are the caller's; negative tags are reserved for the collectives.
  virtual Result<Request> isend(int dst, int tag, const void* data, size_t bytes) = 0;
  virtual Result<Request> irecv(int src, int tag, void* data, size_t bytes) = 0;

  // recv: [size() * bytes], rank r's contribution at r * bytes (its own included).
  virtual Status allgather(const void* send, size_t bytes, void* recv) = 0;
  virtual Status broadcast(void* data, size_t bytes, int root) = 0;
  virtual Status barrier() = 0;

  // Fails every pending and later operation of every rank with `why` (a worker failed).
  virtual void abort(const Status& why) = 0;
  // Why the group was aborted (by any rank, or because a rank died), or OK; never blocks.
  virtual Status abort_status() const { return Status::OK(); }

 protected:
  // InvalidArgument when peer is not a rank other than this one, or tag is reserved.
  Status check_peer(int peer, int tag, const char* op) const;
};

// Waits for every request (all of them, even after a failure); the first error.
Status wait_all(std::span<Request> requests);

// The pause between two polls of something a peer completes: yields for the first 1,000 polls,
// then sleeps, doubling from 20 µs up to max_sleep_us. One per wait loop; not thread-safe.
class PollBackoff {
 public:
  explicit PollBackoff(int max_sleep_us) : max_sleep_us_(max_sleep_us) {}
  void pause();

 private:
  int max_sleep_us_;
  int polls_ = 0;
  int sleep_us_ = 0;
};

// Waits for one request without occupying a core: polls test() with a PollBackoff (MPI and the
// threads transport would otherwise spin on a rank that is idle for minutes).
Status wait_idle(Pending& request, int max_sleep_us = 2000);

}  // namespace ragd::seqparallel
