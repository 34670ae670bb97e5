// CUDA graphs: what a sequence of launchers enqueues on a stream, captured once and replayed with
// one launch. Kernel arguments (pointers, sizes) are frozen at capture; anything that changes between
// replays must live in device memory the kernels read (the engine's step metadata, KV lengths).
// Thread-safety: a Graph is used by one thread at a time; capture is thread-local to the capturing
// thread (other threads' CUDA calls are unaffected).
#pragma once

#include <functional>

#include "ragd/common/status.h"

namespace ragd::kernels::cuda {

class Graph {
 public:
  Graph() = default;
  Graph(Graph&& o) noexcept;
  Graph& operator=(Graph&& o) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  // Runs `body` with `stream` in capture mode (nothing executes) and instantiates what it enqueued.
  // body's error is returned as is (the capture is ended and discarded); so is a launch that cannot
  // be captured (a synchronising call, pageable host memory).
  static Result<Graph> capture(void* stream, const std::function<Status()>& body);
  // Enqueues one replay on `stream`.
  Status launch(void* stream) const;
  size_t nodes() const { return nodes_; }

 private:
  void* exec_ = nullptr;  // cudaGraphExec_t
  size_t nodes_ = 0;
};

}  // namespace ragd::kernels::cuda
