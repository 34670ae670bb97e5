// The daemon's long-context route in virtual time: runs the LongContextPolicy sends to the
// sequence-parallel group (pipelines/long_context_policy.h: the daemon's own rule) wait in a FIFO
// and run one at a time, beside the replica's batch; each takes the performance model's times
// (seqparallel::predict with the cost model's kernel rates) at the degree the policy picks:
// its prefill, then one decode step per further token.
//
// Modelled as the route's own resource: the group's workers do not slow the replica's batch
// engine (on a GPU fleet the group holds its own devices; on this 2-core VM the daemon's route
// shares the cores, which this model leaves out). KV that spills out of the group's pools is
// costed as if it stayed in them (the spill's reads are not in the performance model).
//
// Thread-safety: not thread-safe; the single-threaded simulation owns it.
#pragma once

#include <cstddef>
#include <deque>

#include "ragd/pipelines/long_context_policy.h"
#include "ragd/sim/cost_model.h"
#include "ragd/sim/event_queue.h"
#include "ragd/sim/simulator.h"
#include "replica.h"

namespace ragd::sim {

class SimLongContextRoute {
 public:
  SimLongContextRoute(int replica, const SimOptions& opts, const CostModel& cost, const std::vector<SimRequest>& reqs,
                      std::vector<SimRecord>& recs, std::vector<LiveRequest>& live);

  // Whether request r goes to the route (the policy's takes()).
  bool takes(const SimRequest& r) const;
  // Queues request i at `now`; it starts when the runs before it have ended.
  void submit(size_t i, double now, EventQueue& q);
  // The run of request i ended at `now` (its kRouteDone event): the next one starts.
  void on_done(size_t i, double now, EventQueue& q);

 private:
  void start(double now, EventQueue& q);

  int replica_;
  const SimOptions& opts_;
  const CostModel& cost_;
  const std::vector<SimRequest>& reqs_;
  std::vector<SimRecord>& recs_;
  std::vector<LiveRequest>& live_;
  // The options' policy with the replica's pool (kv_pool_bytes may have been swept after it was made).
  pipelines::LongContextPolicy policy_;
  std::deque<size_t> queue_;
  bool busy_ = false;
};

// The tokens a request may generate, as the scheduler is told (its max_new_tokens).
int max_new_tokens(const SimRequest& r);

}  // namespace ragd::sim
