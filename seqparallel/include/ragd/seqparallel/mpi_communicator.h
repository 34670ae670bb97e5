// The MPI transport (OpenMPI from Debian): one worker per rank of MPI_COMM_WORLD, as started by
// `mpirun -np N`. Messages are MPI_BYTE point-to-point (split into pieces below 2 GiB); the
// collectives are MPI's own, non-blocking ones. MPI is initialised with MPI_THREAD_SERIALIZED: one
// thread of the process talks to MPI at a time (the worker's step thread).
// A rank that dies or gives up: MPI (without ULFM) never says so, so a TCP peer watch beside it
// (src/peer_watch.h) does, and every wait polls it: the others' pending and later operations return
// Unavailable naming the rank, abort() tells the group instead of ending the job, and a group
// that lost a rank does not call MPI_Finalize. For rank 0 to outlive a rank, mpirun must not end
// the job when one exits: OpenMPI's `--mca orte_enable_recovery 1`.
//
// Compiled when CMake finds MPI (RAGD_HAVE_MPI); otherwise create() returns Unimplemented.
// Thread-safety: one thread at a time.
#pragma once

#include <memory>

#include "ragd/common/status.h"
#include "ragd/seqparallel/communicator.h"

namespace ragd::seqparallel {

// Initialises MPI if it is not yet (and finalises it when the last communicator made here goes),
// with errors returned rather than fatal. The communicator spans MPI_COMM_WORLD.
Result<std::unique_ptr<Communicator>> make_mpi_communicator(int* argc, char*** argv);

// True when this build has the MPI transport.
bool have_mpi();

}  // namespace ragd::seqparallel
