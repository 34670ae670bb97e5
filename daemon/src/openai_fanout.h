// Private to the daemon: OpenAI requests answered by several runs — `n` > 1 choices, or several
// prompts on /v1/completions — one run per choice (index = prompt * n + i).
//
// The first run starts alone; the others start once it has produced its second token (or ended),
// when the executor has published the prompt's KV: they reuse it from the KV cache (prefix or
// knowledge-tree reuse) instead of computing it again, which their usage shows as reused tokens.
// Ownership: the gather owns every choice's state; each run's consumer owns the gather; a state
// points back at its gather without owning it.
// Thread-safety: a run's consumer calls are ordered; different runs' may come concurrently from
// executor threads. OaiGather's counters are guarded by mu; `choices` is fixed before any run starts.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "openai_encode.h"

namespace ragd::daemon {

struct OaiGather {
  std::mutex mu;
  int n = 1;                                       // choices per prompt
  std::vector<std::shared_ptr<OaiState>> choices;  // by index; fixed before the first run starts
  int remaining = 0;                               // guarded by mu: runs not yet ended
  bool ended = false;                              // guarded by mu: the answer or an error went out
  bool sources_sent = false;                       // guarded by mu

  // A run ended normally: true for the last one when no error ended the request (it answers).
  bool run_ended() {
    std::lock_guard<std::mutex> l(mu);
    if (--remaining > 0 || ended) return false;
    ended = true;
    return true;
  }
  // A run failed: true for the first failure when nothing was answered (it answers, alone).
  bool fail() {
    std::lock_guard<std::mutex> l(mu);
    if (ended) return false;
    ended = true;
    return true;
  }
  // Sources go out once, with the first run that has them.
  bool first_sources() {
    std::lock_guard<std::mutex> l(mu);
    if (sources_sent) return false;
    sources_sent = true;
    return true;
  }
  std::vector<const OaiState*> all() const {
    std::vector<const OaiState*> v;
    for (const auto& c : choices) v.push_back(c.get());
    return v;
  }
};

}  // namespace ragd::daemon
