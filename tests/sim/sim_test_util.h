// Shared helpers of the simulator tests: a hand-set cost model and small option sets.
#pragma once

#include "ragd/sim/cost_model.h"
#include "ragd/sim/simulator.h"

namespace ragd::sim::testing {

// Round numbers so expected service times can be written down by hand.
inline CostModel simple_cost() {
  CostModel c;
  c.engine.dense_tokens_per_s = 10000;   // 0.1 ms per prefill token
  c.engine.attn_pairs_per_s = 1e12;      // attention nearly free
  c.engine.masked_pairs_per_s = 1e12;
  c.engine.decode_dense_s = 0.005;       // 5 ms weight-read floor per step
  c.engine.kv_read_bytes_per_s = 1e15;
  c.engine.link_bytes_per_s = 1e10;
  c.serving.network_s = 0;
  c.serving.retrieval_s = 0.001;
  c.shape = ModelShape{4, 2, 16, 2};     // 512 bytes per token
  return c;
}

inline SimOptions small_fleet() {
  SimOptions o;
  o.kv.pool_blocks = 4096;
  o.kv.block_size = 16;
  o.kv.dram_bytes = 0;
  o.kv.ssd_bytes = 0;
  o.series_period_s = 1;
  o.max_concurrent_per_tenant = 0;  // the tests that need a limit set one
  return o;
}

}  // namespace ragd::sim::testing
