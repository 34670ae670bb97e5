#include "ragd/seqparallel/communicator.h"

#include <string>

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

}  // namespace ragd::seqparallel
