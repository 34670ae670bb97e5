// A rocksdb::FileSystem wrapper that fails operations on demand (SsdFaults): tests of the SSD
// tier's error paths. Internal to kvstore.
// Thread-safety: as the wrapped file system; the flags are atomics.
#pragma once

#include <memory>

#include <rocksdb/file_system.h>

#include "ragd/kvstore/ssd_tier.h"

namespace ragd::kvstore {

std::shared_ptr<rocksdb::FileSystem> make_fault_file_system(std::shared_ptr<rocksdb::FileSystem> base,
                                                            std::shared_ptr<SsdFaults> faults);

}  // namespace ragd::kvstore
