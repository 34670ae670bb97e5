#include "ragd/seqparallel/mpi_communicator.h"

#include <string>

#ifdef RAGD_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <vector>
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

// A transfer split into pieces below 2 GiB; wait() completes them all.
class MpiPending final : public Pending {
 public:
  explicit MpiPending(std::vector<MPI_Request> reqs) : reqs_(std::move(reqs)) {}
  ~MpiPending() override {
    for (MPI_Request& r : reqs_) {
      if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);  // never leave MPI writing into freed memory
    }
  }
  Result<bool> test() override {
    if (reqs_.empty()) return true;
    int flag = 0;
    int rc = MPI_Testall(static_cast<int>(reqs_.size()), reqs_.data(), &flag, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "test");
    return flag != 0;  // completed requests become MPI_REQUEST_NULL: a later wait() returns at once
  }
  Status wait() override {
    if (reqs_.empty()) return Status::OK();
    int rc = MPI_Waitall(static_cast<int>(reqs_.size()), reqs_.data(), MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "wait");
    return Status::OK();
  }

 private:
  std::vector<MPI_Request> reqs_;
};

// One transfer posted in pieces below 2 GiB (MPI counts are int); post(offset, count, &request)
// posts one piece. On a failure the pieces already posted complete before the error returns.
template <typename Post>
Result<Request> in_pieces(size_t bytes, const std::string& what, Post post) {
  std::vector<MPI_Request> reqs;
  size_t off = 0;
  do {
    const int n = static_cast<int>(std::min(kPiece, bytes - off));
    MPI_Request r;
    if (int rc = post(off, n, &r); rc != MPI_SUCCESS) {
      MpiPending done(std::move(reqs));
      return mpi_error(rc, what);
    }
    reqs.push_back(r);
    off += n;
  } while (off < bytes);
  return Request(new MpiPending(std::move(reqs)));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size, bool owns_init) : rank_(rank), size_(size), owns_init_(owns_init) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_init_ && !finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view transport() const override { return "mpi"; }

  Result<Request> isend(int dst, int tag, const void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(dst, tag, "isend"));
    auto* p = static_cast<char*>(const_cast<void*>(data));  // MPI_Isend takes const void*; one helper for both
    return in_pieces(bytes, "isend to rank " + std::to_string(dst), [&](size_t off, int n, MPI_Request* r) {
      return MPI_Isend(p + off, n, MPI_BYTE, dst, tag, MPI_COMM_WORLD, r);
    });
  }

  Result<Request> irecv(int src, int tag, void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(src, tag, "irecv"));
    auto* p = static_cast<char*>(data);
    return in_pieces(bytes, "irecv from rank " + std::to_string(src), [&](size_t off, int n, MPI_Request* r) {
      return MPI_Irecv(p + off, n, MPI_BYTE, src, tag, MPI_COMM_WORLD, r);
    });
  }

  Status allgather(const void* send, size_t bytes, void* recv) override {
    if (bytes > static_cast<size_t>(INT_MAX)) {
      return Status::InvalidArgument("allgather: " + std::to_string(bytes) + " bytes per rank is over MPI's int count");
    }
    int rc = MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, recv, static_cast<int>(bytes), MPI_BYTE, MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "allgather");
    return Status::OK();
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size_) return Status::InvalidArgument("broadcast: root " + std::to_string(root) + " is not a rank");
    auto* p = static_cast<char*>(data);
    size_t off = 0;
    do {
      const int n = static_cast<int>(std::min(kPiece, bytes - off));
      int rc = MPI_Bcast(p + off, n, MPI_BYTE, root, MPI_COMM_WORLD);
      if (rc != MPI_SUCCESS) return mpi_error(rc, "broadcast");
      off += n;
    } while (off < bytes);
    return Status::OK();
  }

  Status barrier() override {
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    if (rc != MPI_SUCCESS) return mpi_error(rc, "barrier");
    return Status::OK();
  }

  // MPI has no way to fail one communicator's peers gracefully: the job ends, as mpirun expects.
  void abort(const Status& why) override { MPI_Abort(MPI_COMM_WORLD, 1); }

 private:
  int rank_, size_;
  bool owns_init_;
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
  return std::unique_ptr<Communicator>(new MpiCommunicator(rank, size, owns));
}

#endif

}  // namespace ragd::seqparallel
