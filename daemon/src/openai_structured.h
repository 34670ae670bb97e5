// Private to the daemon: the structured-output fields of the OpenAI routes — `response_format`
// ({"type": "text" | "json_object" | "json_schema", "json_schema": {"name", "schema", "strict"}}) and
// vLLM's extensions `guided_json`, `guided_regex`, `guided_choice`, plus ragd's
// `guided_whitespace_max` — parsed into the run's constraint (engine::ConstraintSpec). The schema
// itself is compiled, and an unsupported keyword refused, when the executor accepts the run (a
// 400 naming the field and the keyword).
// Thread-safety: a pure function.
#pragma once

#include "json_fields.h"
#include "ragd/pipelines/executor.h"

namespace ragd::daemon {

ApiError parse_structured_output(const Fields& f, pipelines::RunRequest* run);

}  // namespace ragd::daemon
