// Pipeline spec files (pipelines/src/pipeline_spec.cpp): TOML with [retriever], [prompt],
// [reuse], [generation] and [iterative] tables, then the sampling parameters a run resolves from
// the spec that parsed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ragd/pipelines/pipeline_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto spec = ragd::pipelines::parse_pipeline_spec(text, "pipelines/fuzz.toml", "fuzz");
  if (!spec.ok()) return 0;
  (void)spec->info();
  ragd::pipelines::RunRequest req;
  req.pipeline = "fuzz";
  req.query = "q";
  (void)ragd::pipelines::resolve_run(req, &*spec);
  req.sampling.max_tokens = 7;
  (void)ragd::pipelines::resolve_run(req, &*spec);
  return 0;
}
