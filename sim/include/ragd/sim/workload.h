// Simulated workloads: the requests a simulation replays, from a generator spec or a trace.
//
// A generator spec is a list of key=value settings (one per line or comma-separated; '#' starts a
// comment), every key optional:
//   rate=10              arrivals per second (> 0)
//   concurrency=0        closed loop: this many clients, each sending its next request when the
//                        previous one ended (as `ragctl bench --concurrency C`); 0 = open loop at rate
//   arrivals=poisson     poisson | uniform (evenly spaced) | bench: the Poisson arrival times
//                        `ragctl bench --rate R --seed S` sends at (std::exponential_distribution over
//                        std::mt19937_64(seed)), so a simulation and a measured run see the same instants
//   requests=1000        requests to generate (>= 1); with duration_s, whichever ends first
//   duration_s=0         arrival window in seconds; 0 = requests decides
//   docs=0               corpus size; 0 = no retrieval (plain prompts of prompt_tokens)
//   zipf=0.9             popularity skew over topics (or documents); 0 = uniform
//   topic_docs=0         documents per topic: a query draws a topic and retrieves its first
//                        docs_per_query documents (as `ragctl bench --topics` corpora); 0 = every
//                        retrieved document is drawn on its own
//   docs_per_query=2     documents in a RAG prompt
//   doc_order=fixed      fixed | shuffled: order of the retrieved documents in the prompt
//   retrieval_noise=0    probability that a query's retrieved list has one document (at a uniform
//                        position) replaced by a random one of the corpus: a real retriever's answer
//                        for a topic varies with the question's words
//   doc_tokens=256       tokens per document
//   reuse=knowledge_tree knowledge_tree | none: none retrieves but reuses nothing (a pipeline with
//                        [reuse] mode = "none"); its prompts are prefix + documents + question long
//   prefix_tokens=32     system prefix of a RAG prompt (the knowledge tree's first node)
//   query_tokens=16      question tokens after the documents
//   prompt_tokens=128    plain prompts: one length or a mixture "64:0.8,1024:0.2" (length:weight)
//   answer_tokens=16     generated tokens: one length or a mixture
//   tenants=1            tenants, assigned uniformly at random
//   seed=1
// Unknown keys and malformed values are refused with a message naming the key.
//
// Thread-safety: value types; generate_requests is pure (seeded).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::sim {

// One node of a request's knowledge-tree path: the system prefix or one document.
struct PathSegment {
  uint64_t doc = 0;  // document id; kPrefixDoc for the system prefix
  int tokens = 0;
};
inline constexpr uint64_t kPrefixDoc = ~uint64_t{0};

struct SimRequest {
  uint64_t id = 0;
  double arrival_s = 0;      // when the client sends it
  int tenant = 0;
  int topic = -1;            // the generator's topic (topic_docs > 0), else -1
  bool retrieval = false;    // goes through retrieval (RAG) before the scheduler
  int prompt_tokens = 0;     // whole prompt: path segments + question
  int answer_tokens = 0;     // generated tokens (the run stops there)
  // What the scheduler is told: max_tokens (0 = answer_tokens, the length itself, as a run cut by
  // max_tokens) and the question the length features read (srtf with a trained head). With
  // max_tokens above answer_tokens the length is the request's hidden stop (a model's EOS), and
  // srtf learns it only with SchedulerOptions::oracle_lengths (benchmarks).
  int max_tokens = 0;
  std::string text;
  std::string pipeline;      // the scheduler's pipeline name (length features); default ""
  std::vector<PathSegment> path;  // empty for plain prompts
};

// A length distribution: one value, or a mixture of values with weights.
struct LengthMix {
  std::vector<std::pair<int, double>> parts = {{128, 1.0}};
  double mean() const;
};

enum class Arrivals : uint8_t { kPoisson, kUniform, kBench };

struct WorkloadSpec {
  double rate = 10;
  Arrivals arrivals = Arrivals::kPoisson;
  long requests = 1000;
  double duration_s = 0;
  long docs = 0;
  double zipf = 0.9;
  int topic_docs = 0;
  int docs_per_query = 2;
  bool shuffle_docs = false;
  double retrieval_noise = 0;
  bool reuse = true;
  int doc_tokens = 256;
  int prefix_tokens = 32;
  int query_tokens = 16;
  LengthMix prompt_tokens;
  LengthMix answer_tokens = {{{16, 1.0}}};
  int tenants = 1;
  uint64_t seed = 1;
  int concurrency = 0;

  // Cross-field checks (docs_per_query <= topic_docs when topics are used, ...), naming the key.
  Status validate() const;
};

// Sets one key (also used by sweeps: --sweep rate=1..64). InvalidArgument naming the key.
[[nodiscard]] Status apply_workload_key(WorkloadSpec& spec, std::string_view key, std::string_view value);
// True when `key` is a workload key.
bool is_workload_key(std::string_view key);
// Parses a spec text on top of `spec`; `source` names it in errors ("w.txt:3: zipf: ...").
[[nodiscard]] Status parse_workload_spec(WorkloadSpec& spec, std::string_view text, const std::string& source);
// Parses "64:0.8,1024:0.2" or "128".
[[nodiscard]] Result<LengthMix> parse_length_mix(std::string_view text);

// The requests of a spec (validated first), in arrival order, ids 1..n.
[[nodiscard]] Result<std::vector<SimRequest>> generate_requests(const WorkloadSpec& spec);

// The most requests generate_requests(spec) can return, without generating them: `requests`, or
// fewer when duration_s ends the arrivals first (rate × duration_s, plus six standard deviations
// for Poisson arrivals).
long max_requests(const WorkloadSpec& spec);

// What a real retriever returned for each request of a workload (bench/sim/retrieved.py writes it
// from `ragctl search` on the served corpus): one JSON object per line, {"docs": [[ID, TOKENS], ...]},
// the documents (chunks) in prompt order with their token counts. InvalidArgument naming the line.
using RetrievedList = std::vector<PathSegment>;
[[nodiscard]] Result<std::vector<RetrievedList>> parse_retrieved_lists(std::string_view jsonl, const std::string& source);
// Replaces each RAG request's documents by the retrieved list of the same index (request i takes
// list i; there must be at least as many lists as RAG requests): the path becomes
// [prefix (prefix_tokens, when > 0)][doc 1]..[doc n] with the listed ids and token counts. With
// keep_prompt (a replayed trace, whose prompt lengths were measured) the prompt length stays and
// must hold the path; otherwise it becomes path + query_tokens. With reuse false the path is
// cleared afterwards (the documents still lengthen the prompt). Plain prompts are left alone.
[[nodiscard]] Status apply_retrieved(std::vector<SimRequest>& reqs, const std::vector<RetrievedList>& lists,
                                     int prefix_tokens, int query_tokens, bool keep_prompt, bool reuse);

}  // namespace ragd::sim
