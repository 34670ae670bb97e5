// The sequence-parallel performance model: predicts prefill time and per-token decode time of a
// long prompt on P workers from kernel rates measured on this machine (calibrate()), and the KV
// bytes each worker holds.
//
//   prefill(N, P) = dense(N / P) + attention(N² / 2P causal pairs) + non-overlapped ring traffic
//     where per layer each of the P-1 ring steps moves one block of N/P tokens' K/V and overlaps
//     with the attention of the previous block (zigzag: every block costs the same), so a step
//     costs max(transfer, attention of one block) and only the excess of transfer is exposed;
//   decode(N, P)  = dense(1 token) + reading N/P tokens' K/V at the measured streaming rate
//     + one all-gather of partial (O, LSE) per layer (latency-bound).
// Compute-part scaling efficiency = T_compute(1) / (P · T_compute(P)).
//
// Thread-safety: pure functions; calibrate() runs the model (one thread at a time, like forward).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/engine/model_config.h"

namespace ragd::seqparallel {

struct KernelRates {
  double dense_tokens_per_s = 0.0;    // prefill rows/s through everything but attention (one worker)
  double attn_pairs_per_s = 0.0;      // causal (query, key) pairs/s of prefill attention, all layers and heads
  double masked_pairs_per_s = 0.0;    // the same over a zigzag shard's explicit positions (the ring's kernels)
  double decode_dense_s = 0.0;        // one decode token, everything but attention
  double kv_read_bytes_per_s = 0.0;   // decode attention's K/V streaming rate
  double link_bytes_per_s = 0.0;      // between two workers (measured by the caller's transport)
  double link_latency_s = 0.0;        // per message
  // First writes into memory nothing has touched yet (page faults and the kernel's zeroing): what
  // a shrink pays for its staging buffer. 0 = not modelled (rates files without the field,
  // optional in JSON).
  double fresh_bytes_per_s = 0.0;
  int threads = 1;                    // threads per worker during calibration
  std::string source;                 // where the rates come from, when not measured here
  std::string describe() const;
};

// Rates measured elsewhere (a GPU run, another machine), as one JSON object with every field of
// KernelRates by name: dense_tokens_per_s, attn_pairs_per_s, masked_pairs_per_s, decode_dense_s,
// kv_read_bytes_per_s, link_bytes_per_s (all > 0), link_latency_s (>= 0), optional threads,
// fresh_bytes_per_s (> 0) and "source" (a string, kept in describe()). Unknown fields are refused, so a misspelt rate is not
// silently ignored. InvalidArgument naming the field.
Result<KernelRates> parse_kernel_rates(std::string_view json);
std::string kernel_rates_json(const KernelRates& r);

// Measures the rates of `model` on this machine with kernels::num_threads() threads: a zero-
// attention forward for the dense part (a layer hook replaces attention), causal prefill attention
// over `attn_tokens` tokens, decode attention over `decode_context` tokens, and memcpy for the
// in-process link. Takes a few seconds; uses the model's KV pool (needs attn_tokens and
// decode_context tokens of room; released after).
Result<KernelRates> calibrate(engine::Model& model, int attn_tokens = 4096, int decode_context = 32768);

struct Prediction {
  double prefill_s = 0.0;
  double prefill_compute_s = 0.0;      // dense + attention per worker
  double prefill_exposed_comm_s = 0.0; // ring traffic not hidden behind attention
  double decode_s = 0.0;               // per token
  double kv_bytes_per_worker = 0.0;
  double prefill_flops = 0.0;          // whole prompt, all workers
};

// kv_bytes_per_token: K+V bytes one token takes in one layer of the pool (f32: 2·kv_dim·4).
Prediction predict(const engine::ModelConfig& cfg, const KernelRates& r, int64_t tokens, int workers,
                   double kv_bytes_per_token);

// Seconds to move a prefilled sequence's KV from `from` workers to the first `to`
// (ShardedSequence::shrink): each sender reads its shard of tokens / from tokens out of its pool
// into f32 rows (at the KV streaming rate), the fullest receiver takes ceil((from - to) / to) such
// shards over the link (bytes and three messages each) and writes them into its pool (at the KV
// rate again). 0 when to == from.
double predict_shrink_s(const engine::ModelConfig& cfg, const KernelRates& r, int64_t tokens, int from, int to);

}  // namespace ragd::seqparallel
