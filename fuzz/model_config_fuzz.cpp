// Hugging Face config.json (engine/src/model_config.cpp): parse and validate, then the shape hash,
// the written form and a second parse of that form.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/engine/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto cfg = ragd::engine::ModelConfig::from_json(json, "config.json");
  if (!cfg.ok()) return 0;
  (void)cfg->validate();
  (void)cfg->shape_hash();
  (void)cfg->q_dim();
  (void)cfg->kv_dim();
  (void)ragd::engine::architecture_name(cfg->architecture);
  const std::string written = cfg->to_json();
  auto again = ragd::engine::ModelConfig::from_json(written, "written config.json");
  (void)again.ok();
  return 0;
}
