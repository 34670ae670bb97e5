#include "ragd/seqparallel/communicator.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

namespace ragd::seqparallel {

Status Communicator::check_peer(int peer, int tag, const char* op) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    return Status::InvalidArgument(std::string(op) + ": peer " + std::to_string(peer) + " is not another rank of a group of " +
                                   std::to_string(size()) + " (this is rank " + std::to_string(rank()) + ")");
  }
  if (tag < 0) return Status::InvalidArgument(std::string(op) + ": tag " + std::to_string(tag) + " is reserved");
  return Status::OK();
}

Status wait_all(std::span<Request> requests) {
  Status first;
  for (Request& r : requests) {
    if (r == nullptr) continue;
    Status s = r->wait();
    if (!s.ok() && first.ok()) first = std::move(s);
    r.reset();
  }
  return first;
}

void PollBackoff::pause() {
  if (polls_++ < 1000) {
    std::this_thread::yield();
  } else {
    sleep_us_ = std::min(max_sleep_us_, std::max(20, sleep_us_ * 2));
    std::this_thread::sleep_for(std::chrono::microseconds(sleep_us_));
  }
}

Status wait_idle(Pending& request, int max_sleep_us) {
  PollBackoff backoff(max_sleep_us);
  for (;;) {
    RAGD_ASSIGN_OR_RETURN(bool done, request.test());
    if (done) return request.wait();
    backoff.pause();
  }
}

}  // namespace ragd::seqparallel
