// kvstore::Options::validate: pure, in the options library (no RocksDB, no hiredis), so that the
// runtime's and the daemon's config checks run it without linking the store.
#include "ragd/common/option_checks.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::kvstore {

Status Options::validate() const {
  RAGD_RETURN_IF_ERROR(check_enum_known("runtime.eviction", eviction));
  return remote.validate();
}

}  // namespace ragd::kvstore
