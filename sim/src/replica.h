// One simulated replica: the real scheduler over a SimKvHost, a retrieval pool and the engine's
// step loop in virtual time. Private to the simulator (simulator.cpp drives it).
// Thread-safety: not thread-safe; the single-threaded simulation owns it.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "ragd/pipelines/scheduler.h"
#include "ragd/sim/event_queue.h"
#include "ragd/sim/sim_kv_host.h"
#include "ragd/sim/simulator.h"

namespace ragd::sim {

class SimLongContextRoute;

// Per-request state shared by the replicas (indexed like the requests).
struct LiveRequest {
  double added_s = 0;       // entered the scheduler
  double admit_s = -1;      // first admitted into a step
  double last_token_s = 0;
  int generated = 0;
  int hint_tokens = 0;      // cached tokens found at lookup, until the loads are done
};

class Replica {
 public:
  Replica(int index, const SimOptions& opts, const CostModel& cost, SharedRemote* remote,
          const std::vector<SimRequest>& reqs, std::vector<SimRecord>& recs, std::vector<LiveRequest>& live);
  ~Replica();

  // The request (index into reqs) reaches this replica at `now`. False when refused (queue full).
  bool accept(size_t i, double now, EventQueue& q);
  void on_retrieval_done(size_t i, double now, EventQueue& q);
  void on_load_done(size_t i, double now, EventQueue& q);
  void on_step_done(double now, EventQueue& q);
  // A run on the long-context route ended (its kRouteDone event).
  void on_route_done(size_t i, double now, EventQueue& q);
  // Requests finished since the last call (indices), for closed-loop clients.
  std::vector<size_t> take_finished() { return std::exchange(finished_, {}); }

  int outstanding() const { return outstanding_; }
  long steps() const { return steps_; }
  double busy_s() const { return busy_s_; }  // virtual time spent in engine steps
  SimKvHost& host() { return host_; }
  const pipelines::Scheduler& scheduler() const { return sched_; }

 private:
  void add(size_t i, int hint_tokens, double now, EventQueue& q);
  // Sends request i to the long-context route when the policy takes it (nothing looked up: a run
  // there reuses no KV); false otherwise.
  bool to_route(size_t i, double now, EventQueue& q);
  void start_step(double now, EventQueue& q);
  double step_seconds(const pipelines::StepPlan& plan);

  int index_;
  const SimOptions& opts_;
  const CostModel& cost_;
  const std::vector<SimRequest>& reqs_;
  std::vector<SimRecord>& recs_;
  std::vector<LiveRequest>& live_;
  pipelines::Scheduler sched_;
  SimKvHost host_;
  std::vector<double> retrieval_free_at_;  // per retrieval thread
  double run_speed_;  // this replica's step-time factor for the whole simulation (run_speed_factor)
  pipelines::StepPlan plan_;
  bool stepping_ = false;
  double contention_s_ = 0;  // arrivals' work beside the stepping engine, charged to its next step
  double idle_since_ = 0;  // when the engine last ran out of work (stepping_ false)
  int outstanding_ = 0;  // accepted, not finished
  int queued_ = 0;       // accepted, not admitted yet
  std::vector<int> tenant_outstanding_;  // accepted, not finished, by tenant
  long steps_ = 0;
  double busy_s_ = 0;
  std::vector<size_t> finished_;
  std::unique_ptr<SimLongContextRoute> route_;  // with SimOptions::long_context
};

}  // namespace ragd::sim
