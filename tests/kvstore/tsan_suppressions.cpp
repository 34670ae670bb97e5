// ThreadSanitizer suppressions compiled into test_kvstore (RAGD_TSAN builds only).
// The Debian RocksDB library is not built with TSAN: its lock-free memtable publishes entries
// through atomics TSAN cannot see, so the memcpy/memcmp interceptors it calls look like races.
// Suppress reports from interceptors called inside librocksdb only; our own code stays checked.
extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:librocksdb.so\n"; }
