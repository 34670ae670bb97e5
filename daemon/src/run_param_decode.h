// Private to the daemon: the run parameters of a request body, decoded by walking
// pipelines::run_param_defs() — the type check, the range check and the 400 message that names
// the field come from the row, on every route. The ragd routes (pipeline runs, the WebSocket) take
// every row by its name; the OpenAI routes take the rows that have an openai_name, by that name.
// Thread-safety: a pure function.
#pragma once

#include "json_fields.h"
#include "ragd/pipelines/run_params.h"

namespace ragd::daemon {

enum class RunRoute : uint8_t { kRagd, kOpenAi };

// Every row present in `f` (null = absent) into `out`.
ApiError decode_run_params(const Fields& f, RunRoute route, pipelines::RunRequest* out);

}  // namespace ragd::daemon
