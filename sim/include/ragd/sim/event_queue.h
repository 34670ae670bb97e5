// EventQueue: the virtual clock of a simulation. Events run in time order; events at the same time
// run in the order they were pushed (a sequence number breaks ties), so a simulation is
// deterministic. Time never goes back: pushing an event before now() is a bug (checked).
// Thread-safety: not thread-safe; one simulation owns it.
#pragma once

#include <cstdint>
#include <queue>
#include <vector>

#include "ragd/common/check.h"

namespace ragd::sim {

// kRouteDone: a run on the long-context route ended (index: its request).
enum class EventKind : uint8_t { kArrival, kRetrievalDone, kLoadDone, kStepDone, kSample, kRouteDone };

struct Event {
  double t = 0;
  uint64_t seq = 0;
  EventKind kind = EventKind::kArrival;
  int replica = -1;
  uint64_t index = 0;  // request index (arrival order) or unused
};

class EventQueue {
 public:
  void push(double t, EventKind kind, int replica, uint64_t index) {
    RAGD_CHECK(t >= now_) << "event at " << t << " before now " << now_;
    heap_.push(Event{t, seq_++, kind, replica, index});
  }
  bool empty() const { return heap_.empty(); }
  size_t size() const { return heap_.size(); }
  // Removes the earliest event and advances the clock to it.
  Event pop() {
    Event e = heap_.top();
    heap_.pop();
    now_ = e.t;
    return e;
  }
  double now() const { return now_; }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, Later> heap_;
  uint64_t seq_ = 0;
  double now_ = 0;
};

}  // namespace ragd::sim
