// ThreadSanitizer suppressions compiled into test_kvstore (RAGD_TSAN builds only).
// The Debian RocksDB library is not built with TSAN: it hands work between its own threads
// through atomics TSAN cannot see, so reports with a frame inside librocksdb (its memtable, its
// file purging, Slice copies) and reads of the test-only fault-injecting file system
// (fault_fs.cpp) by RocksDB's background threads are suppressed. Our own cross-thread state
// (tree, pins, load handles, writer queue) has no RocksDB frame and stays fully checked.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:librocksdb.so\n"
         "race:librocksdb.so\n"
         "race:tests/kvstore/fault_fs.cpp\n";
}
