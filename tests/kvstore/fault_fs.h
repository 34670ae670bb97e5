// Test-only: a rocksdb::FileSystem wrapper that fails operations on demand, handed to the SSD tier
// through kvstore::Options::ssd_file_system (production code knows nothing of it).
// Thread-safety: as the wrapped file system; the flags are atomics.
#pragma once

#include <memory>

#include <rocksdb/file_system.h>

#include <atomic>
#include <cstdint>

namespace ragd::kvstore {

// Failures to inject; flags may be flipped from any thread at any time.
struct SsdFaults {
  std::atomic<bool> no_space{false};     // writes / syncs fail with "No space left on device"
  std::atomic<bool> write_error{false};  // writes / syncs fail with an I/O error
  std::atomic<bool> read_error{false};   // reads from SST / blob files fail with an I/O error
  std::atomic<uint64_t> injected{0};     // number of failures injected so far
};

std::shared_ptr<rocksdb::FileSystem> make_fault_file_system(std::shared_ptr<rocksdb::FileSystem> base,
                                                            std::shared_ptr<SsdFaults> faults);

}  // namespace ragd::kvstore
