// Named model shapes (Llama-family configs without weights): `ragctl make-model --preset`, the
// benchmarks' --preset and tests that need a realistic shape. One table, so a preset means the same
// model everywhere.
//   tiny        2 layers × 64, 4/2 heads, vocab 512            (tests)
//   small       8 layers × 512, 8/4 heads, vocab 32000         (CPU demos and benchmarks)
//   qwen2-0.5b  Qwen2-0.5B's shape: 24 × 896, 14/2 heads, qkv bias, tied, vocab 151936
//   llama3-8b   Llama-3-8B's shape: 32 × 4096, 32/8 heads, llama3 RoPE scaling, vocab 128256
// Thread-safety: pure functions.
#pragma once

#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model_config.h"

namespace ragd::engine {

// The config of preset `name` (head_dim = hidden / heads, max positions as the model it mirrors);
// InvalidArgument listing the names otherwise.
Result<ModelConfig> preset_config(std::string_view name);
// The names above, in that order.
std::vector<std::string_view> preset_names();

}  // namespace ragd::engine
