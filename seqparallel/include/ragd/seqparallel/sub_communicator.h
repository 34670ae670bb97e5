// The first `size` ranks of a group as a group of their own: what a sequence-parallel run of a
// smaller degree than the whole group talks over (sp_service.h, elastic degree), while the other
// ranks stay idle. Point-to-point messages go through the parent unchanged (same ranks, same tags);
// the collectives are built from them on tags of their own, so they never meet the parent's.
// abort() aborts the parent (a failing rank stops the whole group, as before).
//
// Thread-safety: as the parent's: used by its rank's thread only. The parent must outlive it.
#pragma once

#include <memory>

#include "ragd/common/status.h"
#include "ragd/seqparallel/communicator.h"

namespace ragd::seqparallel {

// InvalidArgument unless 1 <= size <= parent.size() and parent.rank() < size.
Result<std::unique_ptr<Communicator>> make_sub_communicator(Communicator& parent, int size);

}  // namespace ragd::seqparallel
