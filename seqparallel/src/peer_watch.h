// PeerWatch: tells every rank of a group, within a poll interval, that another rank died or gave
// up — what MPI without fault tolerance (OpenMPI 4, no ULFM) never reports: a receive from a rank
// that was killed simply never completes, and mpirun (with orte_enable_recovery) keeps the others
// running. A star of TCP connections with rank 0 as the hub, beside the MPI traffic:
//   - a connection that closes without a goodbye (the kernel closes a dead process's sockets) marks
//     the group failed: "rank N exited";
//   - fail(why) sends a notice; the hub passes every notice on to every other rank;
//   - goodbye() (a rank that leaves cleanly, before MPI_Finalize) is not a failure.
// Each connection opens with the group's random 16-byte key, handed to every rank by the MPI
// broadcast that also carries the hub's address, so a stranger that reaches the port is dropped.
// The hub listens on loopback when every rank runs on its host, else on every interface.
//
// Thread-safety: failure(), failed(), fail() and goodbye() may be called from any thread; one
// monitor thread owns the sockets' reads.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::seqparallel {

class PeerWatch {
 public:
  // Broadcast from rank 0 to every rank (blocking, called once by every rank at creation).
  using Broadcast = std::function<Status(void* data, size_t bytes)>;

  // Called by every rank of the group at the same point. same_host: every rank runs on this host.
  static Result<std::unique_ptr<PeerWatch>> create(int rank, int size, bool same_host, const Broadcast& bcast);
  ~PeerWatch();
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // OK while no rank failed; else the first failure seen.
  Status failure() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // This rank gives up: the others learn `why` (through the hub).
  void fail(const Status& why);
  // This rank leaves cleanly (before MPI_Finalize): its connection closing is not a failure.
  void goodbye();

 private:
  PeerWatch(int rank, int size) : rank_(rank), size_(size) {}
  void monitor();
  void mark_failed(const Status& why);
  // Connection `from` reported (or, closing, is) a failure: marked here; the hub tells the rest.
  void peer_failed(size_t from, const Status& why);
  // A failure notice on every connection but `except` (kNobody: all).
  static constexpr size_t kNobody = static_cast<size_t>(-1);
  void tell(const std::string& text, size_t except);
  void send_to(int fd, char kind, const std::string& text);
  void on_message(size_t peer, char kind, const std::string& text);

  const int rank_, size_;
  // Rank 0: one per other rank (index = rank - 1); others: one, to rank 0. -1 once closed.
  std::vector<int> fds_;
  std::vector<std::string> inbox_;  // bytes read and not yet a whole message, per connection
  std::vector<bool> said_bye_;
  int wake_[2] = {-1, -1};  // a pipe that ends the monitor
  std::thread thread_;
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;  // failure_, writes to the sockets, said_bye_
  Status failure_;
};

}  // namespace ragd::seqparallel
