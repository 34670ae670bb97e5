// Random-weight models in memory, for benchmarks and tests that need a real forward pass of a
// given shape without a checkpoint on disk (`ragctl make-model` writes the same kind to disk).
// Thread-safety: pure function; the returned store is immutable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "ragd/engine/model_config.h"
#include "ragd/engine/safetensors.h"

namespace ragd::engine {

// Every tensor a Llama-family model of `cfg` needs (HF names; q/k/v biases when
// cfg.attention_bias; no lm_head when tied), f32. Projections and embeddings are uniform with
// standard deviation 1/sqrt(fan_in) so activations stay finite through all layers; norm weights are
// 1 +- 0.05. Deterministic in `seed`; filled in parallel (OpenMP).
std::map<std::string, OwnedTensor> random_weight_tensors(const ModelConfig& cfg, uint64_t seed);
// The same tensors as a WeightStore, for Model::create.
std::unique_ptr<WeightStore> make_random_weights(const ModelConfig& cfg, uint64_t seed);

}  // namespace ragd::engine
