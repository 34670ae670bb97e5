// RuntimeOptions: the one check of the [runtime] table (each nested module's own validate(), then
// the runtime's ranges) and the KV store's derived fields. Uses only the modules' public headers
// and options libraries, never their code, so the daemon's config layer links it alone
// (ragd_pipelines_options).
#include "ragd/pipelines/runtime_options.h"

#include <filesystem>
#include <string>

#include "ragd/common/option_checks.h"
#include "ragd/pipelines/param_range.h"

namespace ragd::pipelines {

Status RuntimeOptions::validate() const {
  RAGD_RETURN_IF_ERROR(model.validate());
  RAGD_RETURN_IF_ERROR(scheduler.validate());
  RAGD_RETURN_IF_ERROR(kv.validate());
  RAGD_RETURN_IF_ERROR(check_enum_known("runtime.sp_partition", sp_partition));
  RAGD_RETURN_IF_ERROR(check_enum_known("runtime.sp_transport", sp_transport));
  RAGD_RETURN_IF_ERROR(check_enum_known("runtime.embedder", embedder));
  RAGD_RETURN_IF_ERROR(kRangeSpeculativeK.check("runtime.speculative_k", speculative.k));
  RAGD_RETURN_IF_ERROR((ParamRange{1, 256}.check("runtime.speculative_max_decodes", speculative.max_decodes)));
  RAGD_RETURN_IF_ERROR((ParamRange{0, 1 << 24}.check("runtime.speculative_answer_ngrams", speculative.answer_ngrams)));
  RAGD_RETURN_IF_ERROR(check_enum_known("runtime.speculative_method", speculative.method));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.max_queue", max_queue, 1));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.chunk_tokens", chunk_tokens, 1));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.retrieval_threads", retrieval_threads, 1));
  if (retrieval_threads_per_tenant < 0 || retrieval_threads_per_tenant > retrieval_threads)
    return Status::InvalidArgument("runtime.retrieval_threads_per_tenant must be in [0, runtime.retrieval_threads = " +
                                   std::to_string(retrieval_threads) + "], got " + std::to_string(retrieval_threads_per_tenant));
  if (!length_model.empty() && scheduler.policy != SchedPolicy::kSrtf)
    return Status::InvalidArgument("runtime.length_model is read by the srtf scheduler only; runtime.scheduler is " +
                                   std::string(enum_name(scheduler.policy)));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.sp_workers", sp_workers, 1));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.sp_threshold_tokens", sp_threshold_tokens, 1));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.sp_chunk_tokens", sp_chunk_tokens, 0));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.kv_spill_chunk_tokens", kv_spill_chunk_tokens, 1));
  if (sp_workers > 1 && engine::parse_device_spec(model.device)->kind != engine::DeviceKind::kCpu)
    return Status::InvalidArgument("runtime.device '" + model.device +
                                   "': sequence parallelism runs on the CPU backend only in this build (its ring "
                                   "attention needs the layer hook); set runtime.sp_workers = 1");
  return Status::OK();
}

seqparallel::SpillOptions RuntimeOptions::spill_options() const {
  seqparallel::SpillOptions o;
  // The spill reads the host pool's bytes: the CPU backend only.
  if (engine::parse_device_spec(model.device)->kind != engine::DeviceKind::kCpu) return o;
  o.dram_bytes = static_cast<int64_t>(kv_spill_dram_bytes);
  if (kv_spill_ssd) {
    o.dir = data_dir.empty() ? std::filesystem::temp_directory_path().string()
                             : (std::filesystem::path(data_dir) / "kv-spill").string();
  }
  return o;
}

kvstore::Options RuntimeOptions::kvstore_options() const {
  kvstore::Options o = kv;
  o.hbm_bytes = hbm_cache ? model.kv_pool_bytes : 0;
  o.ssd_dir = !data_dir.empty() && kv.ssd_bytes > 0 ? (std::filesystem::path(data_dir) / "kvcache").string() : std::string();
  o.tenant_isolation = true;  // RunRequest::kv_scope joins the key ("" = shared)
  return o;
}

}  // namespace ragd::pipelines
