// LowerTiers over kvstore::KvStore: DRAM and SSD (RocksDB under <data_dir>/kvcache). The
// kvstore's own HBM-role tier is left empty: the engine's pool (HbmCache) plays that role.
// Thread-safety: thread-safe (KvStore is).
#pragma once

#include <memory>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/pipelines/runtime.h"

#include "lower_tiers.h"

namespace ragd::pipelines {

Result<std::unique_ptr<LowerTiers>> open_kvstore_tiers(const RuntimeOptions& opts, engine::Model& model);

}  // namespace ragd::pipelines
