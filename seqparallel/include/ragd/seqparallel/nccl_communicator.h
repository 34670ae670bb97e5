// The NCCL transport: one worker per GPU, messages over NVLink / InfiniBand / PCIe as NCCL
// routes them. It is built on another communicator of the same ranks (threads in one process,
// or an MPI job), the bootstrap: rank 0 creates the NCCL id and broadcasts it over the
// bootstrap, and every rank then joins the NCCL communicator on its device.
//
// Buffers may live in device memory (the CUDA engine's KV blocks: sent and received in place) or
// in host memory (the CPU engine's: staged through a device buffer of the transfer's size).
//
// Semantics, as the Communicator interface states them, with one restriction NCCL imposes:
//   - a send is matched with the peer's next posted receive from this rank, in posting order
//     (NCCL has no tags). A 16-byte header travels with every message, so a receive that meets a
//     message of another tag or size fails with both named instead of returning wrong bytes;
//   - posted operations are issued together, as one NCCL group, as soon as a send and a receive
//     are both queued, or at the first test() / wait() / collective. The ring's "receive from the
//     previous rank, send to the next" therefore travels while the caller computes, and cannot
//     deadlock the way two separately launched, blocking NCCL kernels can;
//   - abort() aborts the NCCL communicator (ncclCommAbort) and the bootstrap, so every rank's
//     pending and later operations fail with the reason.
//
// libnccl.so.2 is loaded at run time (dlopen), so a binary built with CUDA still starts on a
// machine without NCCL or without a GPU; make_nccl_communicator() then says which is missing.
//
// Compiled when CMake finds CUDA and nccl.h (RAGD_HAVE_NCCL); otherwise the functions below
// return Unimplemented. Thread-safety: one thread at a time (the worker's step thread).
#pragma once

#include <memory>

#include "ragd/common/status.h"
#include "ragd/seqparallel/communicator.h"

namespace ragd::seqparallel {

// OK when this build has the NCCL transport, libnccl.so.2 loads and a CUDA device is visible;
// otherwise the reason. *devices (optional) receives the number of visible CUDA devices.
Status nccl_available(int* devices = nullptr);

// Joins the NCCL communicator spanning bootstrap's ranks on CUDA device `device` (-1: the rank
// modulo the visible devices). Every rank of bootstrap calls it at the same time (it blocks until
// all have joined). The result owns the bootstrap. NCCL refuses two ranks on one device.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(std::unique_ptr<Communicator> bootstrap, int device = -1);

}  // namespace ragd::seqparallel
