// RuntimeOptions: the one range check of the [runtime] table and its composition into module
// Options. Uses only the modules' public headers (tables and value types), never their code, so
// the daemon's config layer links it alone (ragd_pipelines_options).
#include "ragd/pipelines/runtime_options.h"
#include "ragd/pipelines/param_range.h"

#include <filesystem>
#include <string>

namespace ragd::pipelines {
namespace {

Status at_least(const char* key, int64_t v, int64_t lo) {
  if (v >= lo) return Status::OK();
  return Status::InvalidArgument(std::string(key) + ": must be " + (lo == 1 ? std::string("> 0") : ">= " + std::to_string(lo)) +
                                 ", got " + std::to_string(v));
}

template <typename E>
Status known(const char* key, E v) {
  if (enum_known(v)) return Status::OK();
  return Status::InvalidArgument(std::string(key) + ": value code " + std::to_string(static_cast<int>(v)) +
                                 " is not one of " + enum_choices<E>());
}

}  // namespace

Status RuntimeOptions::validate() const {
  auto dev = engine::parse_device_spec(device);
  if (!dev.ok()) return dev.status().with_context("runtime");
  RAGD_RETURN_IF_ERROR(known("runtime.weights", weights));
  RAGD_RETURN_IF_ERROR(known("runtime.kv_dtype", kv_dtype));
  RAGD_RETURN_IF_ERROR(known("runtime.scheduler", scheduler));
  RAGD_RETURN_IF_ERROR(known("runtime.eviction", eviction));
  RAGD_RETURN_IF_ERROR(known("runtime.preemption", preemption));
  RAGD_RETURN_IF_ERROR(known("runtime.sp_partition", sp_partition));
  RAGD_RETURN_IF_ERROR(known("runtime.sp_transport", sp_transport));
  RAGD_RETURN_IF_ERROR(known("runtime.embedder", embedder));
  RAGD_RETURN_IF_ERROR(at_least("runtime.max_batch_tokens", max_batch_tokens, 1));
  RAGD_RETURN_IF_ERROR(kRangeSpeculativeK.check("runtime.speculative_k", speculative_k));
  RAGD_RETURN_IF_ERROR((ParamRange{1, 256}.check("runtime.speculative_max_decodes", speculative_max_decodes)));
  RAGD_RETURN_IF_ERROR(at_least("runtime.max_running", max_running, 1));
  RAGD_RETURN_IF_ERROR(at_least("runtime.max_queue", max_queue, 1));
  RAGD_RETURN_IF_ERROR(at_least("runtime.kv_block_size", kv_block_size, 1));
  RAGD_RETURN_IF_ERROR(at_least("runtime.chunk_tokens", chunk_tokens, 1));
  RAGD_RETURN_IF_ERROR(at_least("runtime.retrieval_threads", retrieval_threads, 1));
  if (tenant_share_percent < 1 || tenant_share_percent > 100)
    return Status::InvalidArgument("runtime.tenant_share_percent must be in [1, 100], got " + std::to_string(tenant_share_percent));
  if (retrieval_threads_per_tenant < 0 || retrieval_threads_per_tenant > retrieval_threads)
    return Status::InvalidArgument("runtime.retrieval_threads_per_tenant must be in [0, runtime.retrieval_threads = " +
                                   std::to_string(retrieval_threads) + "], got " + std::to_string(retrieval_threads_per_tenant));
  if (!length_model.empty() && scheduler != SchedPolicy::kSrtf)
    return Status::InvalidArgument("runtime.length_model is read by the srtf scheduler only; runtime.scheduler is " +
                                   std::string(enum_name(scheduler)));
  RAGD_RETURN_IF_ERROR(at_least("runtime.num_threads", num_threads, 0));
  RAGD_RETURN_IF_ERROR(at_least("runtime.sp_workers", sp_workers, 1));
  RAGD_RETURN_IF_ERROR(at_least("runtime.sp_threshold_tokens", sp_threshold_tokens, 1));
  RAGD_RETURN_IF_ERROR(at_least("runtime.sp_chunk_tokens", sp_chunk_tokens, 0));
  if (sp_workers > 1 && dev->kind != engine::DeviceKind::kCpu)
    return Status::InvalidArgument("runtime.device '" + device +
                                   "': sequence parallelism runs on the CPU backend only in this build (its ring "
                                   "attention needs the layer hook); set runtime.sp_workers = 1");
  return Status::OK();
}

Result<engine::ModelOptions> RuntimeOptions::model_options() const {
  RAGD_RETURN_IF_ERROR(validate());
  engine::ModelOptions mo;
  mo.device = device;
  mo.weights = weights;
  mo.kv_dtype = kv_dtype;
  mo.kv_pool_bytes = kv_pool_bytes;
  mo.kv_block_size = kv_block_size;
  mo.num_threads = num_threads;
  return mo;
}

Result<SchedulerOptions> RuntimeOptions::scheduler_options() const {
  RAGD_RETURN_IF_ERROR(validate());
  SchedulerOptions so;
  so.policy = scheduler;
  so.preemption = preemption;
  so.max_batch_tokens = max_batch_tokens;
  so.max_running = max_running;
  so.tenant_share = tenant_share_percent / 100.0;
  so.oracle_lengths = test_hooks.oracle_lengths;  // benchmarks only; length_model is loaded by the executor
  return so;
}

kvstore::Options RuntimeOptions::kvstore_options() const {
  kvstore::Options o;
  o.hbm_bytes = hbm_cache ? kv_pool_bytes : 0;
  o.dram_bytes = dram_cache_bytes;
  o.ssd_bytes = ssd_cache_bytes;
  if (!data_dir.empty() && ssd_cache_bytes > 0) o.ssd_dir = (std::filesystem::path(data_dir) / "kvcache").string();
  o.eviction = eviction;
  o.tenant_isolation = true;  // RunRequest::kv_scope joins the key ("" = shared)
  o.write_behind = true;
  o.events = kv_events;
  o.remote = kv_remote;
  return o;
}

}  // namespace ragd::pipelines
