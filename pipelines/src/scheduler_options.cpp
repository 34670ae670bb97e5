// SchedulerOptions::validate: pure, in ragd_pipelines_options, so that the daemon's config check
// runs it without linking the scheduler.
#include "ragd/common/option_checks.h"
#include "ragd/pipelines/scheduler.h"

namespace ragd::pipelines {

Status SchedulerOptions::validate() const {
  RAGD_RETURN_IF_ERROR(check_enum_known("runtime.scheduler", policy));
  RAGD_RETURN_IF_ERROR(check_enum_known("runtime.preemption", preemption));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.max_batch_tokens", max_batch_tokens, 1));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.max_running", max_running, 1));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.starvation_window", starvation_window, 1));
  RAGD_RETURN_IF_ERROR(check_at_least("runtime.srtf_starvation_window", srtf_starvation_window, 1));
  if (tenant_share_percent < 1 || tenant_share_percent > 100)
    return Status::InvalidArgument("runtime.tenant_share_percent must be in [1, 100], got " + std::to_string(tenant_share_percent));
  return Status::OK();
}

}  // namespace ragd::pipelines
