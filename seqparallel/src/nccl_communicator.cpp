#include "ragd/seqparallel/nccl_communicator.h"

#include <string>

#ifdef RAGD_HAVE_NCCL
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>
#endif

namespace ragd::seqparallel {

#ifndef RAGD_HAVE_NCCL

Status nccl_available(int* devices) {
  if (devices != nullptr) *devices = 0;
  return Status::Unimplemented("this build has no NCCL transport (CUDA or nccl.h was not found at configure time)");
}

Result<std::unique_ptr<Communicator>> make_nccl_communicator(std::unique_ptr<Communicator>, int) { return nccl_available(); }

#else

namespace {

// libnccl.so.2's entry points, loaded once per process.
struct NcclApi {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommGetAsyncError) comm_get_async_error = nullptr;
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  std::string error;  // why it did not load; empty when it did
};

template <typename F>
bool load_symbol(void* lib, const char* name, F* f) {
  *f = reinterpret_cast<F>(dlsym(lib, name));
  return *f != nullptr;
}

const NcclApi& nccl() {
  static const NcclApi api = [] {
    NcclApi a;
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      a.error = std::string("libnccl.so.2 could not be loaded: ") + (e != nullptr ? e : "not found");
      return a;
    }
    const bool ok = load_symbol(lib, "ncclGetUniqueId", &a.get_unique_id) &&
                    load_symbol(lib, "ncclCommInitRank", &a.comm_init_rank) &&
                    load_symbol(lib, "ncclCommAbort", &a.comm_abort) && load_symbol(lib, "ncclCommDestroy", &a.comm_destroy) &&
                    load_symbol(lib, "ncclCommGetAsyncError", &a.comm_get_async_error) &&
                    load_symbol(lib, "ncclGetErrorString", &a.get_error_string) &&
                    load_symbol(lib, "ncclGroupStart", &a.group_start) && load_symbol(lib, "ncclGroupEnd", &a.group_end) &&
                    load_symbol(lib, "ncclSend", &a.send) && load_symbol(lib, "ncclRecv", &a.recv) &&
                    load_symbol(lib, "ncclAllGather", &a.all_gather) && load_symbol(lib, "ncclBroadcast", &a.broadcast) &&
                    load_symbol(lib, "ncclAllReduce", &a.all_reduce);
    if (!ok) a.error = "libnccl.so.2 lacks a symbol this transport needs (NCCL >= 2.7 has them all)";
    return a;
  }();
  return api;
}

Status nccl_status(ncclResult_t rc, const std::string& what) {
  if (rc == ncclSuccess) return Status::OK();
  return Status::Unavailable("NCCL " + what + ": " + nccl().get_error_string(rc));
}

Status cuda_status(cudaError_t rc, const std::string& what) {
  if (rc == cudaSuccess) return Status::OK();
  return Status::Unavailable("CUDA " + what + ": " + cudaGetErrorString(rc));
}

bool is_device_pointer(const void* p) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
    (void)cudaGetLastError();  // unregistered host memory on old runtimes: not an error to keep
    return false;
  }
  return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

using Event = std::shared_ptr<std::remove_pointer_t<cudaEvent_t>>;

// Travels before every message: a receive checks that it met the message it was posted for.
struct WireHeader {
  uint32_t magic;
  int32_t tag;
  uint64_t bytes;
};
static_assert(sizeof(WireHeader) == 16);
constexpr uint32_t kWireMagic = 0x4c43434e;  // "NCCL"
constexpr int kMaxPollSleepUs = 1000;  // a transfer in flight is polled at least every millisecond

class NcclCommunicator;

// One point-to-point operation, from post to completion.
struct Op {
  bool send = false;
  int peer = 0;
  int tag = 0;
  void* host = nullptr;      // the caller's buffer (host or device)
  size_t bytes = 0;
  bool staged = false;       // the payload goes through `dev` (the caller's buffer is host memory)
  void* dev = nullptr;       // device payload (the caller's buffer when not staged)
  WireHeader* dev_header = nullptr;
  bool issued = false, finished = false;
  Event done;  // recorded after the group that carries the operation
  Status status;
};

class NcclPending final : public Pending {
 public:
  NcclPending(NcclCommunicator* comm, std::shared_ptr<Op> op) : comm_(comm), op_(std::move(op)) {}
  ~NcclPending() override;
  Result<bool> test() override;
  Status wait() override;

 private:
  NcclCommunicator* comm_;
  std::shared_ptr<Op> op_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::unique_ptr<Communicator> boot, int device) : boot_(std::move(boot)), device_(device) {}

  Status init() {
    RAGD_RETURN_IF_ERROR(cuda_status(cudaSetDevice(device_), "set device " + std::to_string(device_)));
    RAGD_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream"));
    RAGD_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking), "copy stream"));
    ncclUniqueId id{};
    Status made = Status::OK();
    if (boot_->rank() == 0) made = nccl_status(nccl().get_unique_id(&id), "get unique id");
    // Every rank takes part in the broadcast, so a failure at rank 0 is told to the others.
    char flag = made.ok() ? 1 : 0;
    RAGD_RETURN_IF_ERROR(boot_->broadcast(&flag, 1, 0));
    if (!made.ok()) return made;
    if (flag == 0) return Status::Unavailable("NCCL: rank 0 could not create the communicator id");
    RAGD_RETURN_IF_ERROR(boot_->broadcast(&id, sizeof id, 0));
    RAGD_RETURN_IF_ERROR(nccl_status(nccl().comm_init_rank(&comm_, boot_->size(), id, boot_->rank()),
                                     "join as rank " + std::to_string(boot_->rank()) + " of " + std::to_string(boot_->size()) +
                                         " on device " + std::to_string(device_)));
    return Status::OK();
  }

  ~NcclCommunicator() override {
    if (comm_ != nullptr) {  // abort() already aborted and dropped an aborted communicator
      (void)cudaSetDevice(device_);
      (void)cudaStreamSynchronize(stream_);
      nccl().comm_destroy(comm_);
    }
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (copy_stream_ != nullptr) cudaStreamDestroy(copy_stream_);
  }

  int rank() const override { return boot_->rank(); }
  int size() const override { return boot_->size(); }
  std::string_view transport() const override { return "nccl"; }

  Result<Request> isend(int dst, int tag, const void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(dst, tag, "isend"));
    return post(true, dst, tag, const_cast<void*>(data), bytes);
  }

  Result<Request> irecv(int src, int tag, void* data, size_t bytes) override {
    RAGD_RETURN_IF_ERROR(check_peer(src, tag, "irecv"));
    return post(false, src, tag, data, bytes);
  }

  Status allgather(const void* send, size_t bytes, void* recv) override {
    RAGD_RETURN_IF_ERROR(usable());
    RAGD_RETURN_IF_ERROR(flush());
    const size_t total = bytes * static_cast<size_t>(size());
    void* dev = nullptr;
    RAGD_RETURN_IF_ERROR(alloc(&dev, std::max<size_t>(total, 1)));
    Status st = to_device(static_cast<char*>(dev) + bytes * rank(), send, bytes);
    if (st.ok()) {
      st = nccl_status(nccl().all_gather(static_cast<char*>(dev) + bytes * rank(), dev, bytes, ncclUint8, comm_, stream_),
                       "allgather");
    }
    if (st.ok()) st = settle("allgather");
    if (st.ok()) st = to_host(recv, dev, total);
    release(dev);
    return failed(st);
  }

  Status broadcast(void* data, size_t bytes, int root) override {
    if (root < 0 || root >= size()) return Status::InvalidArgument("broadcast: root " + std::to_string(root) + " is not a rank");
    RAGD_RETURN_IF_ERROR(usable());
    RAGD_RETURN_IF_ERROR(flush());
    void* dev = nullptr;
    RAGD_RETURN_IF_ERROR(alloc(&dev, std::max<size_t>(bytes, 1)));
    Status st = rank() == root ? to_device(dev, data, bytes) : Status::OK();
    if (st.ok()) st = nccl_status(nccl().broadcast(dev, dev, bytes, ncclUint8, root, comm_, stream_), "broadcast");
    if (st.ok()) st = settle("broadcast");
    if (st.ok() && rank() != root) st = to_host(data, dev, bytes);
    release(dev);
    return failed(st);
  }

  Status barrier() override {
    RAGD_RETURN_IF_ERROR(usable());
    RAGD_RETURN_IF_ERROR(flush());
    void* dev = nullptr;
    RAGD_RETURN_IF_ERROR(alloc(&dev, sizeof(float)));
    Status st = cuda_status(cudaMemsetAsync(dev, 0, sizeof(float), stream_), "memset");
    if (st.ok()) st = nccl_status(nccl().all_reduce(dev, dev, 1, ncclFloat32, ncclSum, comm_, stream_), "barrier");
    if (st.ok()) st = settle("barrier");
    release(dev);
    return failed(st);
  }

  void abort(const Status& why) override {
    {
      std::lock_guard<std::mutex> l(abort_mu_);
      if (aborted_) return;
      abort_status_ = why.ok() ? Status::Cancelled("sequence-parallel group aborted") : why;
      aborted_ = true;
    }
    if (comm_ != nullptr) {
      (void)cudaSetDevice(device_);
      nccl().comm_abort(comm_);  // unblocks this rank's NCCL kernels; the peers' fail or are told below
      comm_ = nullptr;
    }
    boot_->abort(abort_status_);
  }

  // --- used by NcclPending ---

  // Issues every queued operation as one NCCL group.
  Status flush() {
    if (queue_.empty()) return Status::OK();
    std::vector<std::shared_ptr<Op>> ops;
    ops.swap(queue_);
    Status st = set_device();
    // Buffers and sends' payloads are staged on the copy stream (never behind a pending receive on
    // the NCCL stream), all of the group's at once, then settled with one synchronisation.
    std::vector<WireHeader> headers(ops.size());
    for (size_t i = 0; i < ops.size() && st.ok(); ++i) {
      Op& op = *ops[i];
      st = cuda_status(cudaMallocAsync(reinterpret_cast<void**>(&op.dev_header), sizeof(WireHeader), copy_stream_),
                       "allocate a message header");
      if (st.ok() && op.staged) {
        st = cuda_status(cudaMallocAsync(&op.dev, op.bytes, copy_stream_), "allocate " + std::to_string(op.bytes) + " bytes");
      }
      if (!st.ok() || !op.send) continue;
      headers[i] = WireHeader{kWireMagic, op.tag, op.bytes};
      st = cuda_status(cudaMemcpyAsync(op.dev_header, &headers[i], sizeof(WireHeader), cudaMemcpyDefault, copy_stream_),
                       "copy to device");
      if (st.ok() && op.staged) {
        st = cuda_status(cudaMemcpyAsync(op.dev, op.host, op.bytes, cudaMemcpyDefault, copy_stream_), "copy to device");
      }
    }
    if (st.ok()) st = cuda_status(cudaStreamSynchronize(copy_stream_), "staging");
    if (st.ok()) {
      st = nccl_status(nccl().group_start(), "group start");
      if (st.ok()) {
        for (auto& op : ops) {
          ncclResult_t rc = op->send ? nccl().send(op->dev_header, sizeof(WireHeader), ncclUint8, op->peer, comm_, stream_)
                                     : nccl().recv(op->dev_header, sizeof(WireHeader), ncclUint8, op->peer, comm_, stream_);
          if (rc == ncclSuccess && op->bytes > 0) {
            rc = op->send ? nccl().send(op->dev, op->bytes, ncclUint8, op->peer, comm_, stream_)
                          : nccl().recv(op->dev, op->bytes, ncclUint8, op->peer, comm_, stream_);
          }
          if (rc != ncclSuccess && st.ok()) st = nccl_status(rc, op->send ? "send" : "recv");
        }
        Status end = nccl_status(nccl().group_end(), "group end");
        if (st.ok()) st = end;
      }
    }
    // Every operation of the group completes with one event, recorded after the group.
    Event ev;
    if (st.ok()) {
      cudaEvent_t e = nullptr;
      st = cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
      if (st.ok()) ev = Event(e, [](cudaEvent_t x) { cudaEventDestroy(x); });
    }
    if (st.ok()) st = cuda_status(cudaEventRecord(ev.get(), stream_), "event record");
    for (auto& op : ops) {
      op->issued = true;
      op->done = ev;
      if (!st.ok()) {
        op->finished = true;
        op->status = st;
        free_op(*op);
      }
    }
    if (!st.ok()) abort(st);
    return st;
  }

  // True once op completed (a received payload is then in the caller's buffer).
  Result<bool> progress(Op& op) {
    if (op.finished) return op.status.ok() ? Result<bool>(true) : Result<bool>(op.status);
    RAGD_RETURN_IF_ERROR(usable());
    if (!op.issued) RAGD_RETURN_IF_ERROR(flush());
    RAGD_RETURN_IF_ERROR(set_device());
    cudaError_t q = cudaEventQuery(op.done.get());
    if (q == cudaErrorNotReady) {
      ncclResult_t async = ncclSuccess;
      if (comm_ != nullptr && nccl().comm_get_async_error(comm_, &async) == ncclSuccess && async != ncclSuccess) {
        Status st = nccl_status(async, op.send ? "send to rank " + std::to_string(op.peer) : "recv from rank " + std::to_string(op.peer));
        abort(st);
        return st;
      }
      return false;
    }
    Status st = cuda_status(q, "event");
    if (st.ok() && !op.send) {
      WireHeader h{};
      st = to_host(&h, op.dev_header, sizeof h);
      if (st.ok() && (h.magic != kWireMagic || h.tag != op.tag || h.bytes != op.bytes)) {
        st = Status::InvalidArgument("NCCL recv from rank " + std::to_string(op.peer) + ": posted for tag " +
                                     std::to_string(op.tag) + ", " + std::to_string(op.bytes) + " bytes, but the next message was tag " +
                                     std::to_string(h.tag) + ", " + std::to_string(h.bytes) +
                                     " bytes (NCCL matches in posting order)");
      }
      if (st.ok() && op.staged) st = to_host(op.host, op.dev, op.bytes);
    }
    op.finished = true;
    op.status = st;
    free_op(op);
    if (!st.ok()) {
      abort(st);
      return st;
    }
    return true;
  }

  // This rank's abort, or a peer's as the bootstrap learned it (then this rank aborts too).
  Status current_abort() {
    {
      std::lock_guard<std::mutex> l(abort_mu_);
      if (aborted_) return abort_status_;
    }
    Status peer = boot_->abort_status();
    if (!peer.ok()) abort(peer);
    return peer;
  }

  // Without side effects: the next operation aborts this rank too (current_abort).
  Status abort_status() const override {
    {
      std::lock_guard<std::mutex> l(abort_mu_);
      if (aborted_) return abort_status_;
    }
    return boot_->abort_status();
  }

 private:
  Result<Request> post(bool send, int peer, int tag, void* data, size_t bytes) {
    RAGD_RETURN_IF_ERROR(usable());
    RAGD_RETURN_IF_ERROR(set_device());
    auto op = std::make_shared<Op>();
    op->send = send;
    op->peer = peer;
    op->tag = tag;
    op->host = data;
    op->bytes = bytes;
    op->staged = bytes > 0 && !is_device_pointer(data);
    if (!op->staged) op->dev = data;
    queue_.push_back(op);
    const bool sends = std::any_of(queue_.begin(), queue_.end(), [](auto& o) { return o->send; });
    const bool recvs = std::any_of(queue_.begin(), queue_.end(), [](auto& o) { return !o->send; });
    if (sends && recvs) RAGD_RETURN_IF_ERROR(flush());
    return Request(new NcclPending(this, std::move(op)));
  }

  Status usable() {
    Status a = current_abort();
    if (!a.ok()) return a;
    if (comm_ == nullptr) return Status::FailedPrecondition("NCCL communicator is not initialised");
    return Status::OK();
  }
  Status set_device() { return cuda_status(cudaSetDevice(device_), "set device"); }

  // Stream-ordered, on the copy stream, and settled before use on the NCCL stream (cudaFree would
  // synchronise the whole device, behind receives that wait for a peer).
  Status alloc(void** p, size_t bytes) {
    RAGD_RETURN_IF_ERROR(cuda_status(cudaMallocAsync(p, bytes, copy_stream_), "allocate " + std::to_string(bytes) + " bytes"));
    return cuda_status(cudaStreamSynchronize(copy_stream_), "allocate");
  }
  void release(void* p) {
    if (p != nullptr) (void)cudaFreeAsync(p, copy_stream_);
  }
  void free_op(Op& op) {
    release(op.dev_header);
    op.dev_header = nullptr;
    if (op.staged) release(op.dev);
    op.dev = nullptr;
  }

  // Blocking copies on the copy stream (pageable host memory: the call returns when it is done).
  Status to_device(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return Status::OK();
    RAGD_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copy_stream_), "copy to device"));
    return cuda_status(cudaStreamSynchronize(copy_stream_), "copy to device");
  }
  Status to_host(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return Status::OK();
    RAGD_RETURN_IF_ERROR(cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copy_stream_), "copy to host"));
    return cuda_status(cudaStreamSynchronize(copy_stream_), "copy to host");
  }

  // Waits for the NCCL stream without spinning a core and without hanging on a dead peer.
  Status settle(const std::string& what) {
    cudaEvent_t ev = nullptr;
    RAGD_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event"));
    Status st = cuda_status(cudaEventRecord(ev, stream_), "event record");
    PollBackoff backoff(kMaxPollSleepUs);
    while (st.ok()) {
      cudaError_t q = cudaEventQuery(ev);
      if (q == cudaSuccess) break;
      if (q != cudaErrorNotReady) {
        st = cuda_status(q, what);
        break;
      }
      ncclResult_t async = ncclSuccess;
      if (nccl().comm_get_async_error(comm_, &async) == ncclSuccess && async != ncclSuccess) st = nccl_status(async, what);
      if (st.ok()) st = current_abort();
      if (st.ok()) backoff.pause();
    }
    cudaEventDestroy(ev);
    return st;
  }

  Status failed(const Status& st) {
    if (!st.ok()) abort(st);
    return st;
  }


 private:
  std::unique_ptr<Communicator> boot_;
  int device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr, copy_stream_ = nullptr;
  std::vector<std::shared_ptr<Op>> queue_;  // posted, not yet issued
  mutable std::mutex abort_mu_;  // guards aborted_ / abort_status_ (the flags only: comm_ belongs to the owning thread)
  bool aborted_ = false;
  Status abort_status_;
};

NcclPending::~NcclPending() {
  // Never leave NCCL writing into a buffer its owner is about to free.
  if (!op_->finished) (void)wait();
}

Result<bool> NcclPending::test() { return comm_->progress(*op_); }

Status NcclPending::wait() {
  PollBackoff backoff(kMaxPollSleepUs);
  for (;;) {
    RAGD_ASSIGN_OR_RETURN(bool done, comm_->progress(*op_));
    if (done) return Status::OK();
    backoff.pause();
  }
}

}  // namespace

Status nccl_available(int* devices) {
  if (devices != nullptr) *devices = 0;
  int n = 0;
  cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    (void)cudaGetLastError();
    return Status::Unavailable(std::string("NCCL transport: no CUDA device (") + cudaGetErrorString(rc) + ")");
  }
  if (devices != nullptr) *devices = n;
  if (n == 0) return Status::Unavailable("NCCL transport: no CUDA device");
  if (!nccl().error.empty()) return Status::Unavailable("NCCL transport: " + nccl().error);
  return Status::OK();
}

Result<std::unique_ptr<Communicator>> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap, int device) {
  if (bootstrap == nullptr) return Status::InvalidArgument("NCCL transport: needs a bootstrap communicator");
  int devices = 0;
  Status avail = nccl_available(&devices);
  if (!avail.ok()) {
    bootstrap->abort(avail);  // the other ranks are about to wait for this one
    return avail;
  }
  if (device < 0) device = bootstrap->rank() % devices;
  if (device >= devices) {
    Status st = Status::InvalidArgument("NCCL transport: device " + std::to_string(device) + " but only " +
                                        std::to_string(devices) + " visible");
    bootstrap->abort(st);
    return st;
  }
  Communicator* boot = bootstrap.get();
  auto comm = std::make_unique<NcclCommunicator>(std::move(bootstrap), device);
  if (Status st = comm->init(); !st.ok()) {
    boot->abort(st);
    return st;
  }
  return std::unique_ptr<Communicator>(std::move(comm));
}

#endif

}  // namespace ragd::seqparallel
