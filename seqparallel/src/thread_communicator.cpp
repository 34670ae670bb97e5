#include "ragd/seqparallel/thread_communicator.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

namespace ragd::seqparallel {

namespace {

// Reserved tags of the collectives (negative: never a caller's).
constexpr int kAllgatherTag = -1;
constexpr int kBroadcastTag = -2;

// One message: the sender's half and the receiver's half, matched in posting order per
// (source, destination, tag). Whichever side waits first on a matched pair copies the bytes.
struct Transfer {
  const void* src = nullptr;
  size_t src_bytes = 0;
  void* dst = nullptr;
  size_t dst_bytes = 0;
  bool has_send = false, has_recv = false;
  bool copying = false, done = false;
  Status status;  // a size mismatch, for both sides
};

using Key = std::tuple<int, int, int>;  // (source, destination, tag)

struct Group {
  explicit Group(int n) : size(n) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  // Per key, the transfers posted by one side and not yet matched by the other (only one side can
  // be ahead at a time, so one queue per key suffices).
  std::map<Key, std::deque<std::shared_ptr<Transfer>>> unmatched;
  Status aborted;  // set once by abort()
};

class TransferPending final : public Pending {
 public:
  TransferPending(std::shared_ptr<Group> g, std::shared_ptr<Transfer> t, Key key)
      : g_(std::move(g)), t_(std::move(t)), key_(key) {}
  Status wait() override {
    std::unique_lock lock(g_->mu);
    Transfer& t = *t_;
    if (done_) return t.status;
    g_->cv.wait(lock, [&] { return (t.has_send && t.has_recv) || !g_->aborted.ok(); });
    if (!(t.has_send && t.has_recv)) return g_->aborted;
    if (!t.copying) {
      t.copying = true;
      Status st;
      if (t.src_bytes != t.dst_bytes) {
        st = Status::InvalidArgument("threads transport: rank " + std::to_string(std::get<1>(key_)) + " expected " +
                                     std::to_string(t.dst_bytes) + " bytes from rank " + std::to_string(std::get<0>(key_)) +
                                     " (tag " + std::to_string(std::get<2>(key_)) + "), the message has " +
                                     std::to_string(t.src_bytes));
      }
      lock.unlock();
      if (st.ok() && t.dst_bytes > 0) std::memcpy(t.dst, t.src, t.dst_bytes);  // transfers of other pairs go on
      lock.lock();
      t.status = st;
      t.done = true;
      g_->cv.notify_all();
    }
    g_->cv.wait(lock, [&] { return t.done || !g_->aborted.ok(); });
    return t.done ? t.status : g_->aborted;
  }
  Result<bool> test() override {
    {
      std::lock_guard lock(g_->mu);
      if (!(t_->has_send && t_->has_recv)) {
        if (!g_->aborted.ok()) return g_->aborted;
        return false;
      }
    }
    RAGD_RETURN_IF_ERROR(wait());  // matched: completes without waiting for the peer
    done_ = true;
    return true;
  }

 private:
  std::shared_ptr<Group> g_;
  std::shared_ptr<Transfer> t_;
  Key key_;
  bool done_ = false;  // completed through test()
};

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> g, int rank) : g_(std::move(g)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return g_->size; }
  std::string_view transport() const override { return "threads"; }

  Result<Request> isend(int dst, int tag, const void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(dst, tag, "isend"));
    return post(rank_, dst, tag, data, bytes, nullptr, 0);
  }
  Result<Request> irecv(int src, int tag, void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(src, tag, "irecv"));
    return post(src, rank_, tag, nullptr, 0, data, bytes);
  }

  Status allgather(const void* send, size_t bytes, void* recv) override {
    auto* out = static_cast<unsigned char*>(recv);
    if (bytes > 0) std::memmove(out + static_cast<size_t>(rank_) * bytes, send, bytes);
    std::vector<Request> reqs;
    for (int r = 0; r < g_->size; ++r) {
      if (r == rank_) continue;
      RAGD_ASSIGN_OR_RETURN(Request s, post(rank_, r, kAllgatherTag, out + static_cast<size_t>(rank_) * bytes, bytes, nullptr, 0));
      reqs.push_back(std::move(s));
      RAGD_ASSIGN_OR_RETURN(Request q, post(r, rank_, kAllgatherTag, nullptr, 0, out + static_cast<size_t>(r) * bytes, bytes));
      reqs.push_back(std::move(q));
    }
    return wait_all(reqs);
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= g_->size) return Status::InvalidArgument("broadcast: root " + std::to_string(root) + " is not a rank");
    std::vector<Request> reqs;
    if (rank_ == root) {
      for (int r = 0; r < g_->size; ++r) {
        if (r == rank_) continue;
        RAGD_ASSIGN_OR_RETURN(Request s, post(rank_, r, kBroadcastTag, data, bytes, nullptr, 0));
        reqs.push_back(std::move(s));
      }
    } else {
      RAGD_ASSIGN_OR_RETURN(Request q, post(root, rank_, kBroadcastTag, nullptr, 0, data, bytes));
      reqs.push_back(std::move(q));
    }
    return wait_all(reqs);
  }

  Status barrier() override {
    const unsigned char mine = 1;
    std::vector<unsigned char> all(g_->size);
    return allgather(&mine, 1, all.data());
  }

  void abort(const Status& why) override {
    {
      std::lock_guard lock(g_->mu);
      if (g_->aborted.ok()) {
        g_->aborted = why.ok() ? Status::Cancelled("sequence-parallel group aborted") : why;
      }
    }
    g_->cv.notify_all();
  }

  Status abort_status() const override {
    std::lock_guard lock(g_->mu);
    return g_->aborted;
  }

 private:
  // Posts one side of a transfer (src non-null: the send; dst non-null or dst_bytes == 0 with src
  // null: the receive) and matches it with the other side's oldest unmatched post of that key.
  Result<Request> post(int from, int to, int tag, const void* src, size_t src_bytes, void* dst, size_t dst_bytes) {
    const bool send = from == rank_;
    const Key key{from, to, tag};
    std::shared_ptr<Transfer> t;
    {
      std::lock_guard lock(g_->mu);
      if (!g_->aborted.ok()) return g_->aborted;
      auto& q = g_->unmatched[key];
      if (!q.empty() && (send ? !q.front()->has_send : !q.front()->has_recv)) {
        t = std::move(q.front());  // the other side is ahead: complete its oldest post
        q.pop_front();
      } else {
        t = std::make_shared<Transfer>();
        q.push_back(t);
      }
      if (send) {
        t->src = src;
        t->src_bytes = src_bytes;
        t->has_send = true;
      } else {
        t->dst = dst;
        t->dst_bytes = dst_bytes;
        t->has_recv = true;
      }
    }
    g_->cv.notify_all();
    return Request(new TransferPending(g_, std::move(t), key));
  }

  std::shared_ptr<Group> g_;
  int rank_;
};

}  // namespace

Result<std::vector<std::unique_ptr<Communicator>>> make_thread_group(int size) {
  if (size < 1) return Status::InvalidArgument("thread group: size must be at least 1, got " + std::to_string(size));
  auto g = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> out;
  for (int r = 0; r < size; ++r) out.push_back(std::make_unique<ThreadCommunicator>(g, r));
  return out;
}

}  // namespace ragd::seqparallel
