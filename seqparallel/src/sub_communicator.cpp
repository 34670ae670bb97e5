#include "ragd/seqparallel/sub_communicator.h"

#include <cstring>
#include <string>
#include <vector>

namespace ragd::seqparallel {

namespace {

// Caller tags the ring and the service use are small; these stay clear of them and under MPI's
// guaranteed tag bound (32767).
constexpr int kGatherTag = 30000;
constexpr int kBroadcastTag = kGatherTag + 1;

class SubCommunicator final : public Communicator {
 public:
  SubCommunicator(Communicator& parent, int size) : parent_(parent), size_(size) {}

  int rank() const override { return parent_.rank(); }
  int size() const override { return size_; }
  std::string_view transport() const override { return parent_.transport(); }

  Result<Request> isend(int dst, int tag, const void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(dst, tag, "isend"));
    return parent_.isend(dst, tag, data, bytes);
  }
  Result<Request> irecv(int src, int tag, void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(src, tag, "irecv"));
    return parent_.irecv(src, tag, data, bytes);
  }

  Status allgather(const void* send, size_t bytes, void* recv) override {
    auto* out = static_cast<unsigned char*>(recv);
    const int me = rank();
    std::memcpy(out + static_cast<size_t>(me) * bytes, send, bytes);
    std::vector<Request> reqs;
    for (int r = 0; r < size_; ++r) {
      if (r == me) continue;
      RAGD_ASSIGN_OR_RETURN(Request in, parent_.irecv(r, kGatherTag, out + static_cast<size_t>(r) * bytes, bytes));
      reqs.push_back(std::move(in));
      RAGD_ASSIGN_OR_RETURN(Request o, parent_.isend(r, kGatherTag, send, bytes));
      reqs.push_back(std::move(o));
    }
    return wait_all(reqs);
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size_) return Status::InvalidArgument("broadcast: root " + std::to_string(root) + " of a group of " + std::to_string(size_));
    std::vector<Request> reqs;
    if (rank() == root) {
      for (int r = 0; r < size_; ++r) {
        if (r == root) continue;
        RAGD_ASSIGN_OR_RETURN(Request o, parent_.isend(r, kBroadcastTag, data, bytes));
        reqs.push_back(std::move(o));
      }
    } else {
      RAGD_ASSIGN_OR_RETURN(Request in, parent_.irecv(root, kBroadcastTag, data, bytes));
      reqs.push_back(std::move(in));
    }
    return wait_all(reqs);
  }

  Status barrier() override {
    const char mine = 1;
    std::vector<char> all(static_cast<size_t>(size_));
    return allgather(&mine, 1, all.data());
  }

  void abort(const Status& why) override { parent_.abort(why); }
  Status abort_status() const override { return parent_.abort_status(); }

 private:
  Communicator& parent_;
  const int size_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_sub_communicator(Communicator& parent, int size) {
  if (size < 1 || size > parent.size() || parent.rank() >= size) {
    return Status::InvalidArgument("sub-communicator of " + std::to_string(size) + " ranks from a group of " +
                                   std::to_string(parent.size()) + " (this is rank " + std::to_string(parent.rank()) + ")");
  }
  return std::unique_ptr<Communicator>(new SubCommunicator(parent, size));
}

}  // namespace ragd::seqparallel
