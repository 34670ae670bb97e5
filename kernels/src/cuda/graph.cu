#include "ragd/kernels/cuda/graph.h"

#include <cuda_runtime.h>

#include <utility>

#include "cuda_util.cuh"

namespace ragd::kernels::cuda {

using detail::as_stream;
using detail::cuda_status;

Graph::Graph(Graph&& o) noexcept : exec_(std::exchange(o.exec_, nullptr)), nodes_(std::exchange(o.nodes_, 0)) {}

Graph& Graph::operator=(Graph&& o) noexcept {
  if (this != &o) {
    if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
    exec_ = std::exchange(o.exec_, nullptr);
    nodes_ = std::exchange(o.nodes_, 0);
  }
  return *this;
}

Graph::~Graph() {
  if (exec_) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
}

Result<Graph> Graph::capture(void* stream, const std::function<Status()>& body) {
  cudaStream_t s = as_stream(stream);
  RAGD_RETURN_IF_ERROR(cuda_status(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"));
  const Status st = body();
  cudaGraph_t g = nullptr;
  const cudaError_t e = cudaStreamEndCapture(s, &g);  // always: the stream leaves capture mode
  if (!st.ok() || e != cudaSuccess) {
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();  // an invalidated capture's error is not the next launch's
    if (!st.ok()) return st;
    return cuda_status(e, "cudaStreamEndCapture");
  }
  Graph out;
  cudaGraphGetNodes(g, nullptr, &out.nodes_);
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, g, 0);
  cudaGraphDestroy(g);
  RAGD_RETURN_IF_ERROR(cuda_status(ie, "cudaGraphInstantiate"));
  out.exec_ = exec;
  return Result<Graph>(std::move(out));
}

Status Graph::launch(void* stream) const {
  if (!exec_) return Status::FailedPrecondition("cuda graph: launch of an empty graph");
  return cuda_status(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), as_stream(stream)), "cudaGraphLaunch");
}

}  // namespace ragd::kernels::cuda
