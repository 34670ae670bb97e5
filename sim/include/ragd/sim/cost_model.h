// CostModel: how long the simulated work takes, from measured rates.
//
// The engine part is seqparallel::KernelRates (what `ragctl plan` measures on this machine, or a
// GPU run's rates.json such as bench/rates/h200-llama3-8b.json). One engine step that feeds T
// tokens costs
//   step = step_overhead_s + prefill_token_s * prefill tokens fed
//        + admit_s * requests admitted in this step
//        + (1 + engine_slowdown) * engine [* (1 + a drawn step_noise_quantiles value, with a noise
//          seed only)], where engine =
//            max(decode_dense_s, T / dense_tokens_per_s)            dense layers, "roofline" (a GPU: the
//                                                                  weight read hides the compute)
//            or decode_dense_s + (T - 1) / dense_tokens_per_s       "additive" (a CPU: they do not overlap)
//            or dense_curve(T)                                       "measured": the forward time of
//               single T-token steps without logits, less their causal attention, measured at several
//               T (`ragctl simulate-steps`, bench/sim/calibrate.py --steps) and interpolated linearly
//               between them; past the last point it grows at 1 / dense_tokens_per_s
//          + Σ prefill items  (n * start + n (n + 1) / 2) / attn_pairs_per_s   causal attention
//                             + prefill_context_s * start        reading the cached context's KV
//          + Σ decode items   context * kv_bytes_per_token / kv_read_bytes_per_s  KV streaming
//          + sample_s * rows sampled
// Serving costs that kernel rates do not cover come from an optional "serving" object in the same
// file (every field optional, defaults below): retrieval, network, tier transfers, per-step
// overhead. A file written by `ragctl plan --json` (rates under "rates") is accepted as is.
//
// Thread-safety: value types; the functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/seqparallel/perf_model.h"

namespace ragd::sim {

// The model's KV shape: what one token's K and V take in the pool, all layers.
struct ModelShape {
  int layers = 32;
  int kv_heads = 8;
  int head_dim = 128;
  int kv_dtype_bytes = 2;  // f32 4, bf16 2, int8 1 (+ scales, ignored)
  double kv_bytes_per_token() const { return 2.0 * layers * kv_heads * head_dim * kv_dtype_bytes; }
  Status validate() const;  // InvalidArgument naming the field
};

// Serving costs outside the engine (the rates file's "serving" object).
struct ServingRates {
  double step_overhead_s = 0.0;       // per engine step: scheduling, launch, bookkeeping; default 0
  double sample_s = 0.0;              // per sampled row (its LM-head row, softmax + draw over the vocabulary;
                                      // with measured steps the LM head's weight read, once per step
                                      // that samples, is in step_overhead_s); default 0
  double prefill_token_s = 0.0;       // per prefill token fed, beyond the kernel rates (KV writes, RoPE,
                                      // embedding, bookkeeping); default 0
  double admit_s = 0.0;               // per request admitted (KV install, first-step setup); default 0
  // The engine terms (dense part, attention, KV reads, sampled rows) of every step take this much
  // longer (a fraction): what the replica's other threads and the machine take from the engine's
  // cores beyond the isolated steps `ragctl simulate-steps` measured; fitted by
  // bench/sim/calibrate.py on one-client runs. Default 0.
  double engine_slowdown = 0.0;
  double request_s = 0.0;             // per request, on its way to the scheduler beside the engine (HTTP
                                      // threads, hand-over between threads, a sleeping scheduler thread's
                                      // wake-up): latency that occupies neither the engine nor a retrieval
                                      // thread, paid after the retrieval; default 0
  double prefill_context_s = 0.0;     // per cached token behind a prefill item (its KV is read from
                                      // memory, not just written as in plan's attention measurement); default 0
  bool dense_additive = false;        // "dense_model": "roofline" (default) | "additive" | "measured" (see above)
  // "dense_curve": [[tokens, seconds], ...], tokens strictly ascending integers >= 1, seconds positive and
  // not decreasing; given exactly when "dense_model" is "measured": the dense part measured at the
  // step sizes a replica runs rather than drawn between plan's one-token and 1024-token points.
  std::vector<std::pair<int, double>> dense_curve;
  double retrieval_s = 0.002;         // one retrieval (embed + search + fetch + prompt build); default 2 ms
  double network_s = 0.0002;          // client <-> replica, one way; default 0.2 ms
  double dram_bytes_per_s = 20e9;     // DRAM -> pool copies; default 20 GB/s
  double ssd_bytes_per_s = 2e9;       // SSD reads; default 2 GB/s
  double ssd_latency_s = 1e-4;        // per SSD load; default 0.1 ms
  double remote_bytes_per_s = 1.25e9; // shared remote tier (Redis) reads; default 1.25 GB/s (10 GbE)
  double remote_latency_s = 5e-4;     // per remote load; default 0.5 ms
  // Publication: engine time lost per byte of a new knowledge-tree node's lower-tier copy (the
  // store's copy thread gathers the node from the pool, builds the checksummed segment, inserts it
  // in DRAM and queues its SSD write-behind; a node evicted from the pool before its copy is
  // gathered on the scheduler thread instead). On a CPU replica this work shares the engine's
  // cores; fitted by bench/sim/calibrate.py from a mostly-miss run. Default 0 (a GPU replica's
  // engine does not wait for host copies).
  double publish_s_per_byte = 0.0;
  // Wake-up: a step that starts after the engine has been idle for at least wake_after_s costs
  // wake_s more (the scheduler thread and the kernels' worker threads were asleep, caches cold).
  // The threshold is far above the sub-millisecond gaps between one client's requests (so the
  // one-client calibration runs, which fit admit_s, see none) and below the gaps of open-loop
  // arrivals; wake_s is fitted by bench/sim/calibrate.py from an open-loop run (with measured steps,
  // from the one-client runs: --wake-constant). Default 0.
  double wake_s = 0.0;
  double wake_after_s = 0.005;
  // The wake-up drawn per request instead of the constant wake_s (the two exclude each other):
  // seconds at equally spaced probabilities 0, 1/(n-1), .., 1 (n >= 2, not decreasing; values may
  // be negative, where the measured time falls below the modelled steps), a piecewise-linear
  // inverse distribution function. The step that wakes draws the value of the first request it
  // admits, from that request's id alone (wake_draw): the same request draws the same time in
  // every run, sweep point and fleet size. Fitted by bench/sim/calibrate.py (--steps) from the
  // one-client runs' time per request beyond the modelled steps.
  std::vector<double> wake_quantiles;
  // Per-request noise of the client's side: client TTFT less the daemon's (both ways of the
  // network, the HTTP threads, the client), seconds at equally spaced probabilities 0, 1/(n-1),
  // .., 1 (n >= 2, not decreasing, >= 0), a piecewise-linear inverse distribution function; fitted
  // by bench/sim/calibrate.py from the one-client calibration runs. Used only by a seeded
  // simulation (SimOptions::noise_seed, `ragctl simulate --replications / --seed`): each request
  // draws its own value independently, half of it on the way in and half on the way back (its
  // first token and its stream's end); unseeded, both ways take network_s.
  std::vector<double> network_quantiles;
  // Per-step noise of the engine: the relative deviation of a step's engine terms (after
  // engine_slowdown) from the model, at equally spaced probabilities (n >= 2, not decreasing, each
  // in (-1, 10]); fitted by bench/sim/calibrate.py from the one-client misses without reuse (each
  // request's prefill time against a least-squares line over its computed tokens). Used only by a
  // seeded simulation: each step draws its own factor (1 + draw), independently per replica, step
  // and seed; unseeded, the factor is 1.
  std::vector<double> step_noise_quantiles;
  // Run-to-run speed of the machine: the standard deviation of the log of a whole run's step time
  // (a VM's speed drifts by several % between minutes, the same requests one minute apart took
  // 6-18 % longer in the calibration's repeated runs). Fitted by `ragctl calibrate` from its
  // repeated closed-loop runs (calibration_runs.h: run_speed_sd). Used only by a seeded simulation:
  // each replica of each replication draws one factor exp(run_speed_sd * z), z standard normal,
  // on all of its steps' time; near saturation queueing turns that into the wide spread of TTFT
  // that real runs of the same requests show. Unseeded, or 0 (default): factor 1.
  double run_speed_sd = 0.0;
  // Contention: engine time lost per request that arrives while the engine is stepping, on a
  // host whose cores the engine's threads fill (the rates' `threads` >= host_cores): the
  // request's HTTP parsing, tokenization, retrieval (embedding, vector search) and prompt
  // building run on a core one of the engine's threads holds, and a parallel region waits for
  // its slowest thread. Paid by the step that starts after the arrival (the step in flight has
  // its end already; a step's length, not its start, is what the work delays); an arrival at an
  // idle engine costs none of it (that request's wake-up, above, carries its own). Fitted by
  // bench/sim/calibrate.py (--contention) on a closed-loop calibration run, where every arrival
  // finds the engine busy. Default 0.
  double arrival_cpu_s = 0.0;
  // The host's cores; 0 (default): not given, arrival_cpu_s applies whenever it is set. With
  // host_cores > the rates' threads a core is left to the other threads and nothing is charged.
  double host_cores = 0.0;
};

struct CostModel {
  seqparallel::KernelRates engine;
  ServingRates serving;
  ModelShape shape;

  // Seconds of the dense part of a step feeding `tokens` tokens.
  double dense_s(int tokens) const;
  // Causal attention of n tokens appended after `start` tokens of context.
  double prefill_attention_s(int start, int n) const;
  // Decode attention reading `context` tokens of KV.
  double decode_attention_s(int context) const;
  // A whole prefill of `fresh` tokens after `cached` tokens in one step (PGDSF's cost T(cached, new)).
  double prefill_s(double cached, double fresh) const;
  // Moving `bytes` at `bytes_per_s` after `latency_s`.
  static double transfer_s(double bytes, double bytes_per_s, double latency_s) { return latency_s + bytes / bytes_per_s; }
  // The wake-up of a step that admits the request with id `key` after the engine idled:
  // serving.wake_s, or the wake_quantiles' inverse distribution function at u = frac(key x the
  // golden ratio) (a low-discrepancy sequence over the request ids: consecutive requests' draws
  // spread evenly over the distribution).
  // With a noise seed (not 0) the sequence is shifted by a fraction drawn from the seed: each
  // request draws another value, the sequence keeps its even spread.
  double wake_draw(uint64_t key, uint64_t noise_seed = 0) const;
  // One way of request `key`'s network: serving.network_s, or with a noise seed (not 0) and
  // network_quantiles half of a value drawn from them, independently per request and seed.
  double network_leg_s(uint64_t key, uint64_t noise_seed = 0) const;
  // The engine-term factor of step `step` of replica `replica`: 1, or with a noise seed (not 0)
  // and step_noise_quantiles 1 + a value drawn from them.
  double step_noise_factor(int replica, uint64_t step, uint64_t noise_seed = 0) const;
  // The step-time factor of replica `replica` for a whole simulation: 1, or with a noise seed (not
  // 0) and run_speed_sd exp(run_speed_sd * z), z a standard normal drawn from (seed, replica).
  double run_speed_factor(int replica, uint64_t noise_seed = 0) const;
  // A piecewise-linear inverse distribution function (values at equally spaced probabilities,
  // non-empty) at u in [0, 1]; on sorted values, their interpolated u-quantile (spread_of).
  static double quantile_at(const std::vector<double>& q, double u);
  // The mean of that draw (wake_s, or the piecewise-linear distribution's mean).
  double wake_mean() const;
  // Engine time a stepping engine loses per arriving request: serving.arrival_cpu_s, or 0 when
  // the engine's threads leave a core free (serving.host_cores > engine.threads).
  double arrival_contention_s() const;
};

// Parses a rates file (see above) for a model of `shape`. InvalidArgument naming the field:
// "rates: serving.ssd_bytes_per_s must be a positive number", "rates: serving: unknown field 'x'",
// or parse_kernel_rates' message for the engine rates.
[[nodiscard]] Result<CostModel> parse_cost_model(std::string_view json, const ModelShape& shape);

}  // namespace ragd::sim
