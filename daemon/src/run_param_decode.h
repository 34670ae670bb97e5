// Private to the daemon: the run parameters of a request body, decoded by walking
// pipelines::run_param_defs() — the type check, the range check and the 400 message that names
// the field come from the row, on every route. Each route takes the rows that have a name on it,
// by that name (pipelines::ParamDef::name(route)): the ragd routes (pipeline runs, the WebSocket)
// and the OpenAI routes (/v1/chat/completions, /v1/completions) share one decoder.
// Thread-safety: a pure function.
#pragma once

#include "json_fields.h"
#include "ragd/pipelines/run_params.h"

namespace ragd::daemon {

using pipelines::RunRoute;

// Every row of `route` present in `f` (null = absent) into `out`, in table order; the first
// refused value is the error (400, `param` = the field's name on that route).
ApiError decode_run_params(const Fields& f, RunRoute route, pipelines::RunRequest* out);

}  // namespace ragd::daemon
