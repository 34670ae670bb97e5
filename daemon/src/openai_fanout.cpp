// The runs of one OpenAI request's choices (openai_fanout.h).
#include "openai_fanout.h"

#include <atomic>

#include "ragd/common/check.h"
#include "ragd/common/log.h"

namespace ragd::daemon {

using pipelines::RunEvent;

namespace {

Status status_of(const ApiError& e) {
  if (e.status == 429) return Status::ResourceExhausted(e.message);
  if (e.status == 503) return Status::Unavailable(e.message);
  if (e.status == 409) return Status::AlreadyExists(e.message);
  return Status::Internal(e.message);
}

}  // namespace

ApiError ApiImpl::start_choices(std::vector<pipelines::RunRequest> runs, std::vector<RunConsumer> consumers,
                                const std::string& route, std::shared_ptr<void> slot) {
  RAGD_CHECK(!runs.empty() && runs.size() == consumers.size()) << "start_choices: one consumer per run";
  auto self = shared_from_this();
  struct Rest {
    std::vector<pipelines::RunRequest> runs;
    std::vector<RunConsumer> consumers;
  };
  auto rest = std::make_shared<Rest>();
  rest->runs.assign(std::make_move_iterator(runs.begin() + 1), std::make_move_iterator(runs.end()));
  rest->consumers.assign(consumers.begin() + 1, consumers.end());
  auto started = std::make_shared<std::atomic<bool>>(false);
  // Off the executor's thread: submitting from inside its event sink is not allowed.
  auto start_rest = [self, rest, started, route, slot] {
    if (started->exchange(true)) return;
    const bool queued = self->blocking_.submit([self, rest, route, slot] {
      for (size_t k = 0; k < rest->runs.size(); ++k) {
        const std::string id = rest->runs[k].id;
        ApiError e = self->start_run(std::move(rest->runs[k]), route, slot, rest->consumers[k]);
        if (!e.failed()) continue;
        log::daemon()->warn("{} choice could not start: {}", id, e.message);
        RunEvent ev;
        ev.kind = RunEvent::Kind::kError;
        ev.error = status_of(e);
        rest->consumers[k](ev);
      }
    });
    if (!queued) {
      RunEvent ev;
      ev.kind = RunEvent::Kind::kError;
      ev.error = Status::ResourceExhausted("the daemon's queue is full: the request's other choices could not start");
      for (auto& c : rest->consumers) c(ev);
    }
  };
  RunConsumer first = consumers[0];
  RunConsumer wrapped = [first, start_rest](const RunEvent& ev) {
    const bool keep = first(ev);
    // The prompt's KV is published after the first token, before the second is sampled. A first
    // run that failed or was cancelled ended the request: the others never start.
    if ((ev.kind == RunEvent::Kind::kToken && ev.index >= 1) || (ev.kind == RunEvent::Kind::kDone && ev.finish_reason != "cancelled"))
      start_rest();
    return keep;
  };
  return start_run(std::move(runs[0]), route, std::move(slot), std::move(wrapped));
}

}  // namespace ragd::daemon
