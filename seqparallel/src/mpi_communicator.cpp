#include "ragd/seqparallel/mpi_communicator.h"

#include <string>

#ifdef RAGD_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

#include "peer_watch.h"
#endif

namespace ragd::seqparallel {

#ifndef RAGD_HAVE_MPI

bool have_mpi() { return false; }

Result<std::unique_ptr<Communicator>> make_mpi_communicator(int*, char***) {
  return Status::Unimplemented("this build has no MPI transport (MPI was not found at configure time)");
}

#else

bool have_mpi() { return true; }

namespace {

constexpr size_t kPiece = size_t{1} << 30;  // bytes per MPI message (counts are int)

Status mpi_error(int code, const std::string& what) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return Status::Unavailable("MPI " + what + ": " + std::string(msg, len));
}

constexpr int kPollMaxSleepUs = 200;  // a wait's longest pause between two MPI_Testall

// OK while every rank is alive (or there is no watch: one rank); else why not. No MPI call may
// follow a failure: requests still posted are abandoned (MPI makes no progress outside its calls,
// so it never touches their buffers).
Status peers_ok(const PeerWatch* watch) { return watch != nullptr ? watch->failure() : Status::OK(); }

// One poll of `reqs`: done, not yet, or the failure (a dead peer or MPI's error).
Result<bool> test_all(std::vector<MPI_Request>& reqs, const PeerWatch* watch, const std::string& what) {
  RAGD_RETURN_IF_ERROR(peers_ok(watch));
  int flag = 0;
  int rc = MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) return mpi_error(rc, what);
  return flag != 0;  // completed requests become MPI_REQUEST_NULL: a later poll returns at once
}

// Completes `reqs` by polling, so that a dead peer (PeerWatch) ends the wait: MPI itself never
// reports one.
Status poll_all(std::vector<MPI_Request>& reqs, const PeerWatch* watch, const std::string& what) {
  PollBackoff backoff(kPollMaxSleepUs);
  for (;;) {
    RAGD_ASSIGN_OR_RETURN(bool done, test_all(reqs, watch, what));
    if (done) return Status::OK();
    backoff.pause();
  }
}

// One non-blocking MPI operation, posted by post(&request) unless a rank is lost, then polled.
template <typename Post>
Status post_and_poll(const PeerWatch* watch, const std::string& what, Post post) {
  RAGD_RETURN_IF_ERROR(peers_ok(watch));
  std::vector<MPI_Request> req(1);
  if (int rc = post(req.data()); rc != MPI_SUCCESS) return mpi_error(rc, what);
  return poll_all(req, watch, what);
}

// A transfer split into pieces below 2 GiB; wait() completes them all.
class MpiPending final : public Pending {
 public:
  MpiPending(std::vector<MPI_Request> reqs, const PeerWatch* watch) : reqs_(std::move(reqs)), watch_(watch) {}
  ~MpiPending() override {
    if (!peers_ok(watch_).ok()) return;  // abandoned: see peers_ok
    for (MPI_Request& r : reqs_) {
      if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);  // never leave MPI writing into freed memory
    }
  }
  Result<bool> test() override {
    if (reqs_.empty()) return true;
    return test_all(reqs_, watch_, "test");
  }
  Status wait() override {
    if (reqs_.empty()) return Status::OK();
    return poll_all(reqs_, watch_, "wait");
  }

 private:
  std::vector<MPI_Request> reqs_;
  const PeerWatch* watch_;
};

// One transfer posted in pieces below 2 GiB (MPI counts are int); post(offset, count, &request)
// posts one piece. On a failure the pieces already posted complete before the error returns.
template <typename Post>
Result<Request> in_pieces(size_t bytes, const std::string& what, const PeerWatch* watch, Post post) {
  RAGD_RETURN_IF_ERROR(peers_ok(watch));
  std::vector<MPI_Request> reqs;
  size_t off = 0;
  do {
    const int n = static_cast<int>(std::min(kPiece, bytes - off));
    MPI_Request r;
    if (int rc = post(off, n, &r); rc != MPI_SUCCESS) {
      MpiPending done(std::move(reqs), watch);
      return mpi_error(rc, what);
    }
    reqs.push_back(r);
    off += n;
  } while (off < bytes);
  return Request(new MpiPending(std::move(reqs), watch));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size, bool owns_init, std::unique_ptr<PeerWatch> watch)
      : rank_(rank), size_(size), owns_init_(owns_init), watch_(std::move(watch)) {}
  ~MpiCommunicator() override {
    // A group that lost a rank does not finalize: MPI_Finalize would wait for the dead one.
    bool lost = false;
    if (watch_ != nullptr) {
      lost = watch_->failed();
      if (!lost) watch_->goodbye();
      watch_.reset();
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_init_ && !finalized && !lost) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view transport() const override { return "mpi"; }

  Result<Request> isend(int dst, int tag, const void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(dst, tag, "isend"));
    auto* p = static_cast<char*>(const_cast<void*>(data));  // MPI_Isend takes const void*; one helper for both
    return in_pieces(bytes, "isend to rank " + std::to_string(dst), watch_.get(), [&](size_t off, int n, MPI_Request* r) {
      return MPI_Isend(p + off, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, r);
    });
  }

  Result<Request> irecv(int src, int tag, void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(src, tag, "irecv"));
    auto* p = static_cast<char*>(data);
    return in_pieces(bytes, "irecv from rank " + std::to_string(src), watch_.get(), [&](size_t off, int n, MPI_Request* r) {
      return MPI_Irecv(p + off, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, r);
    });
  }

  // The collectives are MPI's non-blocking ones, polled (poll_all): a rank that died mid-collective
  // ends the wait instead of hanging it.
  Status allgather(const void* send, size_t bytes, void* recv) override {
    if (bytes > static_cast<size_t>(INT_MAX)) {
      return Status::InvalidArgument("allgather: " + std::to_string(bytes) + " bytes per rank is over MPI's int count");
    }
    return post_and_poll(watch_.get(), "allgather", [&](MPI_Request* r) {
      return MPI_Iallgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE,
                            MPI_COMM_WORLD, r);
    });
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size_) return Status::InvalidArgument("broadcast: root " + std::to_string(root) + " is not a rank");
    auto* p = static_cast<char*>(data);
    size_t off = 0;
    do {
      const int n = static_cast<int>(std::min(kPiece, bytes - off));
      RAGD_RETURN_IF_ERROR(post_and_poll(watch_.get(), "broadcast", [&](MPI_Request* r) {
        return MPI_Ibcast(p + off, n, MPI_BYTE, root, MPI_COMM_WORLD, r);
      }));
      off += n;
    } while (off < bytes);
    return Status::OK();
  }

  Status barrier() override {
    return post_and_poll(watch_.get(), "barrier", [&](MPI_Request* r) { return MPI_Ibarrier(MPI_COMM_WORLD, r); });
  }

  // The others learn it through the peer watch: their waits return `why`, rank 0 serves on.
  void abort(const Status& why) override {
    if (watch_ != nullptr) watch_->fail(why);
  }
  Status abort_status() const override { return peers_ok(watch_.get()); }

 private:
  int rank_, size_;
  bool owns_init_;
  std::unique_ptr<PeerWatch> watch_;  // null with one rank
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  bool owns = false;
  if (!initialized) {
    int provided = 0;
    int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return Status::Unavailable("MPI_Init_thread failed");
    if (provided < MPI_THREAD_SERIALIZED) {
      MPI_Finalize();
      return Status::Unavailable("MPI: this MPI library does not provide MPI_THREAD_SERIALIZED");
    }
    owns = true;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::unique_ptr<PeerWatch> watch;
  if (size > 1) {
    // Whether every rank runs on this host (the watch then stays on loopback).
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    std::vector<char> all(sizeof host * static_cast<size_t>(size));
    if (int rc = MPI_Allgather(host, sizeof host, MPI_BYTE, all.data(), sizeof host, MPI_BYTE, MPI_COMM_WORLD);
        rc != MPI_SUCCESS)
      return mpi_error(rc, "allgather of host names");
    bool same_host = true;
    for (int r = 0; r < size; ++r) same_host &= std::strncmp(all.data() + r * sizeof host, host, sizeof host) == 0;
    auto w = PeerWatch::create(rank, size, same_host, [](void* data, size_t bytes) {
      int rc = MPI_Bcast(data, static_cast<int>(bytes), MPI_BYTE, 0, MPI_COMM_WORLD);
      return rc == MPI_SUCCESS ? Status::OK() : mpi_error(rc, "broadcast of the peer watch's address");
    });
    if (!w.ok()) return w.status().with_context("MPI rank " + std::to_string(rank));
    watch = std::move(w).value();
  }
  return std::unique_ptr<Communicator>(new MpiCommunicator(rank, size, owns, std::move(watch)));
}

#endif

}  // namespace ragd::seqparallel
