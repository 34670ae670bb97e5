// The in-process transport: N ranks that are threads of one process (tests, one machine with
// several sockets or NUMA nodes). A message is copied once, by the receiver, straight from the
// sender's buffer (rendezvous); a send completes when its receiver has copied it.
//
// Thread-safety: each Communicator of a group is used by its own thread; the group's shared state
// is guarded by one mutex (held for matching only, never during a copy).
#pragma once

#include <memory>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/seqparallel/communicator.h"

namespace ragd::seqparallel {

// A group of `size` connected ranks; element r is rank r. InvalidArgument when size < 1.
Result<std::vector<std::unique_ptr<Communicator>>> make_thread_group(int size);

}  // namespace ragd::seqparallel
