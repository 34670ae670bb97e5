// ragctl simulate: the fleet simulator (sim/): ragd's real scheduler and knowledge tree in virtual
// time, costed from measured rates, on a generated or replayed workload.
//
//   ragctl simulate [--config ragd.toml] --rates R.json (--model DIR | --preset NAME)
//                   --workload SPEC|FILE|trace:BENCH.json [--replicas N] [--router leastconn|hash|kv-aware]
//                   [--set key=value ...] [--sweep key=a..b] [--slo-ttft-ms MS]
//                   [--replications N] [--seed S] [--real RUN.json,...] [--out report.html] [--json result.json]
//
// The config's [runtime] table gives the scheduler (policy, budget, slots, preemption), the KV pool,
// the tiers and the eviction policy, retrieval threads and the queue limit, exactly as the daemon
// reads them; --set overrides any fleet or workload key (sim/sweep.h). The report is the one
// `ragctl bench` renders, plus a simulation section (memory per tier over time, hit rate per tier);
// the JSON is bench's format, so `ragctl bench-report real.json sim.json` compares the two.
// A trace (`ragctl bench --json` output) replays its requests' prompt and answer lengths at the
// instants the bench sent them (files without them: at its offered rate, Poisson, with the run's
// recorded seed; bench_trace.h); `--retrieved FILE` (bench/sim/retrieved.py: what the real
// retriever returns for each request) gives a trace, or a generated workload, the documents each
// request really retrieved, so that a replayed trace reuses KV as the daemon did.
// --replications N (and --seed S, default 1) runs every point N times with the per-request noise
// seeded S, S + 1, .. (sim/simulator.h: noise_seed; the rates' network_quantiles and
// step_noise_quantiles, and the wake-up draws): the JSON's "replications" and the report give each metric's median over them and its
// 10th-90th percentile range; the bench runs shown are the first replication's. Without either
// option one deterministic run, without noise.
// --real RUN.json,...: measured runs of the same requests (a trace replay's own runs) printed beside
// the prediction (the replications' median, else the deterministic run) with their run-to-run
// spread and the validation's targets (measured_compare.h); in the JSON's "comparison" and the report.
// Every point prints its engine's busy share; an open-loop point busier than the validated region
// (kPredictionUtilisationBound) gets a warning.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_report.h"
#include "bench_trace.h"
#include "command.h"
#include "ragd/common/json_writer.h"
#include "ragd/common/process.h"
#include "enum_option.h"
#include "ragd/daemon/config.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/presets.h"
#include "ragd/kernels/kv_dtype.h"
#include "ragd/pipelines/length_model.h"
#include "ragd/sim/cost_model.h"
#include "ragd/sim/simulator.h"
#include "ragd/sim/sweep.h"
#include "ragd/sim/workload.h"
#include "measured_compare.h"
#include "simulate_report.h"
#include "synthetic_words.h"

namespace ragd::tools {
namespace {

struct SimArgs {
  std::string config, rates, model, preset, workload, sweep, out, json, emit, retrieved;
  std::vector<std::string> sets;
  std::vector<std::string> real;  // measured runs of the same requests (--real), one file each
  int replicas = 1;
  bool replicas_set = false;  // --replicas given (else the fleet's default, 1)
  std::string router;
  kernels::KvDtype kv_dtype = kernels::KvDtype::kF32;
  bool kv_dtype_set = false;
  double slo_ttft_ms = 1000;
  bool no_itl = false;
  int replications = 1;
  uint64_t seed = 0;  // 0: not given (1 with --replications)
};

// The metrics summarised over replications, in this order (names as in the JSON).
constexpr const char* kRepMetrics[] = {"ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "ttft_mean_ms", "req_per_s",
                                       "tpot_p50_ms",  "e2e_p50_ms",  "e2e_p99_ms",  "hit_pct"};
constexpr size_t kRepCount = std::size(kRepMetrics);

std::array<double, kRepCount> rep_metrics(const BenchRun& run, const sim::SimResult& res) {
  double sum = 0;
  long n = 0;
  for (const sim::SimRecord& r : res.records)
    if (r.ok && r.ttft_ms >= 0) {
      sum += r.ttft_ms;
      ++n;
    }
  return {run.ttft_ms.p50, run.ttft_ms.p90,   run.ttft_ms.p99, n > 0 ? sum / n : 0.0,         run.req_per_s,
          run.tpot_ms.p50, run.e2e_ms.p50,    run.e2e_ms.p99,  100 * sim_tier_hits(res).total()};
}

// One point's replications: its label, their seeds and every metric's values in replication order.
struct RepPoint {
  std::string label;
  uint64_t seed = 0;
  std::array<std::vector<double>, kRepCount> values;
};

// The "replications" array of the JSON: per point, per metric, median / p10 / p90 / min / max and
// the values.
std::string replications_json(const std::vector<RepPoint>& points) {
  JsonWriter w;
  w.begin_array();
  for (const RepPoint& p : points) {
    w.begin_object().key("label").value(p.label).key("n").value(static_cast<int64_t>(p.values[0].size()));
    w.key("seed").value(static_cast<int64_t>(p.seed)).key("metrics").begin_object();
    for (size_t m = 0; m < kRepCount; ++m) {
      const sim::Spread s = sim::spread_of(p.values[m]);
      w.key(kRepMetrics[m]).begin_object().key("median").value(s.median).key("p10").value(s.p10);
      w.key("p90").value(s.p90).key("min").value(s.min).key("max").value(s.max).key("values").begin_array();
      for (double v : p.values[m]) w.value(v);
      w.end_array().end_object();
    }
    w.end_object().end_object();
  }
  w.end_array();
  return w.take();
}

// Above this share of busy engine time an open-loop prediction is outside the region the
// validation covered (docs/design/simulator.md, "Where predictions hold"): rows up to 79 % busy
// met their TTFT targets on the 2-core VM of 2026-12-07; at 84 % TTFT p50 came out 30-50 % high.
constexpr double kPredictionUtilisationBound = 0.80;

// The busiest replica's engine time over the span from the first arrival to the last event.
double engine_utilisation(const sim::SimResult& res, const std::vector<sim::SimRequest>& reqs) {
  const double start = reqs.empty() ? 0.0 : reqs.front().arrival_s;
  const double span = res.duration_s - start;
  if (span <= 0) return 0;
  double most = 0;
  for (double b : res.engine_busy_s) most = std::max(most, b);
  return most / span;
}

Result<std::string> read_file(const std::string& path, const char* what) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound(std::string(what) + ": cannot read " + path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Result<engine::ModelConfig> model_config(const SimArgs& a, const daemon::DaemonConfig& cfg) {
  std::string dir = a.model.empty() ? cfg.runtime.model_dir : a.model;
  if (!a.preset.empty()) return engine::preset_config(a.preset);
  if (!dir.empty()) return engine::ModelConfig::from_json_file(dir + "/config.json");
  return Status::InvalidArgument("give --model DIR, --preset NAME or a config with runtime.model_dir");
}

sim::ModelShape model_shape(const SimArgs& a, const daemon::DaemonConfig& cfg, const engine::ModelConfig& mc) {
  sim::ModelShape s;
  s.layers = mc.num_hidden_layers;
  s.kv_heads = mc.num_key_value_heads;
  s.head_dim = mc.head_dim;
  s.kv_dtype_bytes = static_cast<int>(kernels::kv_dtype_bytes(a.kv_dtype_set ? a.kv_dtype : cfg.runtime.model.kv_dtype));
  return s;
}

// The daemon's [runtime] table as simulated fleet options.
Result<sim::SimOptions> fleet_options(const daemon::DaemonConfig& cfg, const sim::ModelShape& shape,
                                      const engine::ModelConfig& mc, const sim::CostModel& cost) {
  const pipelines::RuntimeOptions& rt = cfg.runtime;  // and [limits]' per-tenant run limit
  RAGD_RETURN_IF_ERROR(rt.validate());
  sim::SimOptions o;
  o.scheduler = rt.scheduler;
  // srtf's length head, as the daemon loads it (a generated workload carries no question text:
  // the head then reads the pipeline, prompt length and max_tokens only).
  if (!rt.length_model.empty()) {
    auto head = pipelines::LengthModel::load(rt.length_model);
    if (!head.ok()) return head.status();
    o.scheduler.length_model = *head;
  }
  o.kv.block_size = rt.model.kv_block_size;
  const double block = shape.kv_bytes_per_token() * rt.model.kv_block_size;
  o.kv.pool_blocks = static_cast<int>(std::min(1e9, static_cast<double>(rt.model.kv_pool_bytes) / block));
  o.kv.hbm_cache = rt.hbm_cache;
  o.kv.dram_bytes = rt.kv.dram_bytes;
  o.kv.ssd_bytes = rt.kv.ssd_bytes;
  o.kv.eviction = rt.kv.eviction;
  o.kv.swap_bytes = rt.swap_bytes;
  o.retrieval_threads = rt.retrieval_threads;
  o.max_queue = rt.max_queue;
  o.max_concurrent_per_tenant = cfg.limits.max_concurrent_per_tenant;
  // The long-context route as the daemon builds it (executor_impl.cpp); the elastic degree, when
  // the config names rates for it, from the simulated hardware's rates (--rates).
  pipelines::LongContextPolicy lc;
  lc.workers = rt.sp_workers;
  lc.threshold_tokens = rt.sp_threshold_tokens;
  lc.pool_blocks = o.kv.pool_blocks;  // the route uses the simulated pool's (kv_pool_bytes may be swept)
  lc.block_size = o.kv.block_size;
  lc.chunk_tokens = rt.sp_chunk_tokens;
  lc.partition = rt.sp_partition;
  lc.spills = rt.kv_spill_dram_bytes > 0 || rt.kv_spill_ssd;
  if (rt.sp_rates.has_value() || !rt.sp_rates_file.empty()) lc.rates = cost.engine;
  lc.model = mc;
  lc.kv_bytes_per_token_layer = shape.kv_bytes_per_token() / std::max(1, shape.layers);
  o.long_context = lc;
  return o;
}

// A bench result's requests replayed (bench_trace.h).
Result<std::vector<sim::SimRequest>> trace_requests(const std::string& path, uint64_t seed) {
  auto br = load_bench_result(path);
  if (!br.ok()) return br.status();
  return tools::trace_requests(*br, path, seed);
}

// The generated requests as a `ragctl bench --workload` file: one synthetic query per request naming
// its topic's word (the documents of topic t are the ones `ragctl bench --ingest-synthetic` wrote for
// it) between two question words that occur in no document, with the request's answer length.
Status emit_bench_workload(const std::vector<sim::SimRequest>& reqs, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  constexpr size_t kAsk = std::size(kSyntheticAskWords);
  for (const sim::SimRequest& r : reqs) {
    if (r.topic < 0) return Status::InvalidArgument("--emit-workload needs a topic workload (docs and topic_docs > 0)");
    f << "{\"query\": \"" << kSyntheticAskWords[r.id % kAsk] << " "
      << synthetic_topic_word(static_cast<uint32_t>(r.topic)) << " "
      << kSyntheticAskWords[(r.id / kAsk + 5) % kAsk] << "?\", \"max_tokens\": " << r.answer_tokens << "}\n";
  }
  if (!f) return Status::IOError(path + ": cannot write");
  return Status::OK();
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}

// What a generated workload's requests will take, estimated before any is generated: the
// simulator's share (sim::estimate_memory_per_request) and the report's (a BenchSample per request
// with its copy of the gaps, and the percentile arrays summarize_bench_run sorts). Each sweep
// point's report is kept for the JSON; its SimResult too when a report or JSON is written; the
// requests, the simulator's state and the replications' records only while the point runs.
// InvalidArgument with the estimate and the limit when it is more than the memory left
// (ragd::available_memory: MemAvailable, the cgroup's limit, RLIMIT_AS).
Status check_memory(const std::vector<std::pair<sim::SimOptions, sim::WorkloadSpec>>& points, int replications,
                    bool keep_results) {
  double kept = 0, transient = 0;
  long most_requests = 0;
  double most_per_request = 0;
  for (const auto& [o, w] : points) {
    const long n = sim::max_requests(w);
    const sim::SimMemoryEstimate e = sim::estimate_memory_per_request(w, o);
    const double gaps = static_cast<double>(e.record - sizeof(sim::SimRecord));
    const double report = sizeof(BenchSample) + 48 + 2 * 4 * sizeof(double) + 3 * gaps;  // 48: an error string
    const double held = report + (keep_results ? static_cast<double>(e.record) : 0);
    const double running = static_cast<double>(e.request) + static_cast<double>(e.record) * replications;
    kept += n * held;
    transient = std::max(transient, n * running);
    if (n > most_requests) most_requests = n, most_per_request = held + running;
  }
  const double need = kept + transient;
  const AvailableMemory avail = available_memory();
  if (avail.source.empty() || need <= static_cast<double>(avail.bytes)) return Status::OK();
  return Status::InvalidArgument(
      "--workload: the simulation needs about " + gib(need) + " (" + std::to_string(most_requests) + " requests at about " +
      std::to_string(static_cast<long>(most_per_request)) + " bytes each, estimated), more than the " +
      gib(static_cast<double>(avail.bytes)) + " of memory available (" + avail.source +
      "); lower requests=, or set duration_s=, or pass --no-itl");
}

int fail(const Status& st) {
  std::fprintf(stderr, "ragctl simulate: %s\n", st.message().c_str());
  return 2;
}

// The runs the long-context route served: how many, at which degrees, their prefill and TTFT.
void print_long_context(const sim::SimResult& res) {
  std::vector<double> prefill, ttft, tpot;
  std::map<std::pair<int, int>, int> degrees;  // (prefill, decode) degrees -> runs
  for (const sim::SimRecord& r : res.records) {
    if (r.sp_degree == 0 || !r.ok) continue;
    ++degrees[{r.sp_degree, r.sp_decode_degree}];
    prefill.push_back(r.prefill_ms / 1e3);
    ttft.push_back(r.ttft_ms / 1e3);
    if (r.tokens > 1) tpot.push_back((r.e2e_ms - r.ttft_ms) / (r.tokens - 1));
  }
  if (degrees.empty()) return;
  std::string ds;
  for (const auto& [d, n] : degrees) {
    const auto [pre, dec] = d;
    ds += (ds.empty() ? "" : ", ") + std::to_string(n) + " at " + std::to_string(pre) +
          (dec != pre ? " -> " + std::to_string(dec) + " for decode" : "");
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("  long-context route: %zu runs (%s workers); prefill s p50 %.1f, TTFT s p50 %.1f, ms per token p50 %.1f\n",
              prefill.size(), ds.c_str(), median(prefill), median(ttft), median(tpot));
}

int run_simulate(const SimArgs& a) {
  daemon::DaemonConfig cfg;
  if (!a.config.empty())
    if (Status st = daemon::load_config_file(cfg, a.config); !st.ok()) return fail(st);
  auto mc = model_config(a, cfg);
  if (!mc.ok()) return fail(mc.status());
  const sim::ModelShape shape = model_shape(a, cfg, *mc);
  if (Status st = shape.validate(); !st.ok()) return fail(st);
  auto rates_text = read_file(a.rates, "--rates");
  if (!rates_text.ok()) return fail(rates_text.status());
  auto cost = sim::parse_cost_model(*rates_text, shape);
  if (!cost.ok()) return fail(Status::InvalidArgument(a.rates + ": " + cost.status().message()));
  auto base = fleet_options(cfg, shape, *mc, *cost);
  if (!base.ok()) return fail(base.status());
  base->keep_itl = !a.no_itl;
  if (a.replicas_set)  // the simulator's range and message: "replicas: expected an integer in [1, 4096], ..."
    if (Status st = sim::apply_sim_key(*base, shape, "replicas", std::to_string(a.replicas)); !st.ok())
      return fail(Status::InvalidArgument("--" + st.message()));
  if (!a.router.empty())
    if (Status st = sim::apply_sim_key(*base, shape, "router", a.router); !st.ok()) return fail(st);

  sim::WorkloadSpec spec;
  std::string trace;
  if (a.workload.rfind("trace:", 0) == 0) {
    trace = a.workload.substr(6);
  } else if (std::filesystem::is_regular_file(a.workload)) {
    auto text = read_file(a.workload, "--workload");
    if (!text.ok()) return fail(text.status());
    if (Status st = sim::parse_workload_spec(spec, *text, a.workload); !st.ok()) return fail(st);
  } else if (Status st = sim::parse_workload_spec(spec, a.workload, "--workload"); !st.ok()) {
    return fail(st);
  }
  for (const std::string& kv : a.sets) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return fail(Status::InvalidArgument("--set " + kv + ": expected key=value"));
    if (Status st = sim::apply_key(*base, spec, shape, kv.substr(0, eq), kv.substr(eq + 1)); !st.ok())
      return fail(Status::InvalidArgument("--set: " + st.message()));
  }
  std::vector<sim::RetrievedList> retrieved;
  if (!a.retrieved.empty()) {
    auto text = read_file(a.retrieved, "--retrieved");
    if (!text.ok()) return fail(text.status());
    auto lists = sim::parse_retrieved_lists(*text, a.retrieved);
    if (!lists.ok()) return fail(lists.status());
    retrieved = std::move(lists).value();
  }
  sim::Sweep sweep;
  if (!a.sweep.empty()) {
    auto s = sim::parse_sweep(a.sweep);
    if (!s.ok()) return fail(s.status());
    sweep = *s;
    if (!trace.empty() && sim::is_workload_key(sweep.key))
      return fail(Status::InvalidArgument("--sweep " + sweep.key + ": a trace workload has no workload keys to sweep"));
  } else {
    sweep.values.push_back("");
  }
  std::vector<RunMetrics> real;
  if (!a.real.empty()) {
    if (sweep.values.size() > 1)
      return fail(Status::InvalidArgument("--real compares one point: give it without --sweep"));
    auto r = load_real_runs(a.real);
    if (!r.ok()) return fail(r.status());
    real = std::move(r).value();
  }
  std::string comparison, comparison_html;  // with --real: the JSON array and the report's section
  if (trace.empty()) {  // a trace's requests are already in memory, as its file's records
    std::vector<std::pair<sim::SimOptions, sim::WorkloadSpec>> points;
    for (const std::string& v : sweep.values) {
      auto& [o, w] = points.emplace_back(*base, spec);
      if (!sweep.key.empty())
        if (Status st = sim::apply_key(o, w, shape, sweep.key, v); !st.ok()) return fail(st);
      o.closed_loop_clients = w.concurrency;
      if (Status st = w.validate(); !st.ok()) return fail(st);
    }
    const int held = a.replications > 1 || a.seed != 0 ? a.replications : 1;
    if (Status st = check_memory(points, held, !a.out.empty() || !a.json.empty()); !st.ok()) return fail(st);
  }

  BenchResult result;
  result.label = "simulated";
  result.url = "simulate";
  result.slo_ttft_ms = a.slo_ttft_ms;
  if (!a.json.empty()) {
    result.source = a.json;
    result.label = std::filesystem::path(a.json).stem().string();
  }
  std::vector<std::unique_ptr<sim::SimResult>> kept;
  std::vector<std::string> labels;
  std::vector<RepPoint> rep_points;
  double capacity = 0;
  const std::string mode = sweep.key.empty() ? "simulate" : "simulate/" + sweep.key;
  for (const std::string& v : sweep.values) {
    sim::SimOptions o = *base;
    sim::WorkloadSpec w = spec;
    if (!sweep.key.empty())
      if (Status st = sim::apply_key(o, w, shape, sweep.key, v); !st.ok()) return fail(st);
    o.closed_loop_clients = w.concurrency;
    Result<std::vector<sim::SimRequest>> reqs = trace.empty() ? sim::generate_requests(w) : trace_requests(trace, w.seed);
    if (!reqs.ok()) return fail(reqs.status());
    if (!retrieved.empty())
      if (Status st = sim::apply_retrieved(*reqs, retrieved, w.prefix_tokens, w.query_tokens, !trace.empty(), w.reuse);
          !st.ok())
        return fail(Status::InvalidArgument("--retrieved " + a.retrieved + ": " + st.message()));
    if (!a.emit.empty() && labels.empty()) {
      if (Status st = emit_bench_workload(*reqs, a.emit); !st.ok()) return fail(st);
      std::printf("wrote %s (%zu requests for ragctl bench --workload)\n", a.emit.c_str(), reqs->size());
    }
    const bool replicate = a.replications > 1 || a.seed != 0;
    const uint64_t seed = a.seed != 0 ? a.seed : 1;
    const auto t0 = std::chrono::steady_clock::now();
    Result<sim::SimResult> res = Status::Internal("not simulated");
    std::vector<sim::SimResult> reps;
    if (replicate) {
      auto all = sim::simulate_replications(o, *cost, *reqs, a.replications, seed);
      if (!all.ok()) return fail(all.status());
      reps = std::move(all).value();
      res = std::move(reps.front());
    } else {
      res = sim::simulate(o, *cost, *reqs);
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!res.ok()) return fail(res.status());
    const double rate = w.concurrency > 0 ? 0 : trace.empty() ? w.rate : (reqs->size() / std::max(1e-9, reqs->back().arrival_s));
    std::string label = sweep.key.empty() ? "simulated" : sweep.key + "=" + v;
    label += " (" + std::to_string(o.replicas) + " replica" + (o.replicas > 1 ? "s" : "") + ")";
    BenchRun run = sim_bench_run(*res, label, mode, rate);
    const TierHits h = sim_tier_hits(*res);
    if (replicate) {
      RepPoint p;
      p.label = label;
      p.seed = seed;
      for (size_t k = 0; k < reps.size(); ++k) {
        const sim::SimResult& x = k == 0 ? *res : reps[k];
        const auto m = rep_metrics(k == 0 ? run : sim_bench_run(x, label, mode, rate), x);
        for (size_t j = 0; j < kRepCount; ++j) p.values[j].push_back(m[j]);
      }
      reps.clear();
      std::printf("%-34s %d replications (noise seeds %llu..%llu): median [p10, p90]\n", label.c_str(), a.replications,
                  static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed + a.replications - 1));
      for (size_t j = 0; j < kRepCount; ++j) {
        const sim::Spread sp = sim::spread_of(p.values[j]);
        std::printf("  %-13s %10.3f [%.3f, %.3f]\n", kRepMetrics[j], sp.median, sp.p10, sp.p90);
      }
      rep_points.push_back(std::move(p));
      std::printf("  the first replication:\n");
    }
    long refused = 0;
    for (const auto& x : res->records) refused += x.refused;
    std::printf("%-34s n=%d refused=%ld unfinished=%ld  req/s %.2f  tok/s %.1f  hit %.1f %% (hbm %.1f dram %.1f ssd %.1f remote %.1f)\n",
                label.c_str(), run.requests, refused, res->unfinished, run.req_per_s, run.tokens_per_s, 100 * h.total(),
                100 * h.hbm, 100 * h.dram, 100 * h.ssd, 100 * h.remote);
    std::printf("  TTFT ms p50 %.1f p90 %.1f p99 %.1f | TPOT ms p50 %.2f p99 %.2f | e2e ms p50 %.1f p99 %.1f\n",
                run.ttft_ms.p50, run.ttft_ms.p90, run.ttft_ms.p99, run.tpot_ms.p50, run.tpot_ms.p99, run.e2e_ms.p50,
                run.e2e_ms.p99);
    std::printf("  simulated %.1f s of virtual time (%ld events, %ld steps) in %.2f s\n", res->duration_s, res->events,
                res->steps, wall);
    std::printf("  publication: %llu copies, %llu skipped, %llu demotions, %.2f s of engine time\n",
                static_cast<unsigned long long>(res->publish.copies),
                static_cast<unsigned long long>(res->publish.copies_skipped),
                static_cast<unsigned long long>(res->publish.demotions), res->publish.engine_s);
    print_long_context(*res);
    const double util = engine_utilisation(*res, *reqs);
    std::printf("  engine busy %.0f %% of the time from the first arrival to the last event (busiest replica)\n",
                100 * util);
    if (w.concurrency == 0 && util > kPredictionUtilisationBound)
      std::printf("  warning: the engine is busy %.0f %% of the time, above the %.0f %% up to which the simulator's "
                  "open-loop predictions were validated (docs/design/simulator.md, \"Where predictions hold\"): "
                  "queueing here grows faster than the model's error bounds; read TTFT as a trend, not a number\n",
                  100 * util, 100 * kPredictionUtilisationBound);
    if (!real.empty()) {
      RunMetrics pred = run_metrics(run);
      pred.hit_pct = 100 * h.total();
      std::string as = "the deterministic run";
      if (replicate) {  // each metric's median over the replications
        const RepPoint& p = rep_points.back();
        for (size_t j = 0; j < kRepCount; ++j)  // names RunMetrics lacks are ignored
          set_metric(&pred, kRepMetrics[j], sim::spread_of(p.values[j]).median);
        as = "median of " + std::to_string(a.replications) + " replications";
      }
      const std::vector<CompareRow> rows = compare_with_real(pred, real);
      std::printf("%s", format_comparison(rows, as).c_str());
      comparison = comparison_json(rows);
      comparison_html = render_comparison_section(rows, as);
    }
    if (res->unfinished > 0)
      std::printf("  warning: %ld requests never finished: a replica could not admit its waiting requests with nothing "
                  "running (its pool held only KV pinned by waiting lookups)\n", res->unfinished);
    if (run.failed == 0 && run.ttft_ms.p99 <= a.slo_ttft_ms) capacity = std::max(capacity, rate);
    result.runs.push_back(std::move(run));
    labels.push_back(label);
    kept.push_back(std::make_unique<sim::SimResult>(std::move(res).value()));
    if (a.out.empty() && a.json.empty()) kept.back().reset();  // nothing to render: free the records
  }
  if (sweep.key == "rate") {
    result.capacity.push_back({mode, capacity});
    std::printf("capacity (p99 TTFT <= %.0f ms): %.2f req/s\n", a.slo_ttft_ms, capacity);
  }
  int rc = 0;
  auto write = [&](const std::string& path, const std::string& text) {
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) {
      std::fprintf(stderr, "ragctl simulate: %s: cannot write\n", path.c_str());
      rc = 2;
    }
  };
  if (!a.json.empty()) {
    std::string text = bench_result_json(result);
    if (!rep_points.empty()) {  // bench's object, plus the replications
      const size_t end = text.rfind('}');
      text.insert(end, ",\"replications\":" + replications_json(rep_points));
    }
    if (!comparison.empty()) {  // and the measured runs beside the prediction
      const size_t end = text.rfind('}');
      text.insert(end, ",\"comparison\":" + comparison);
    }
    write(a.json, text);
  }
  if (!a.out.empty()) {
    std::vector<const sim::SimResult*> ptrs;
    for (const auto& k : kept) ptrs.push_back(k.get());
    std::string page = insert_section(render_bench_report({result}), render_sim_section(labels, ptrs));
    if (!rep_points.empty()) {
      std::vector<RepSummary> sums;
      for (const RepPoint& p : rep_points) {
        RepSummary r;
        r.label = p.label;
        r.n = static_cast<int>(p.values[0].size());
        r.seed = p.seed;
        for (size_t j = 0; j < kRepCount; ++j) r.metrics.emplace_back(kRepMetrics[j], sim::spread_of(p.values[j]));
        sums.push_back(std::move(r));
      }
      page = insert_section(std::move(page), render_replications_section(sums));
    }
    if (!comparison_html.empty()) page = insert_section(std::move(page), comparison_html);
    write(a.out, page);
  }
  return rc;
}

Registration reg("simulate", "simulate a fleet in virtual time: the real scheduler and KV cache policies on measured rates",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<SimArgs>();
                   sub.add_option("--config", a->config, "daemon config (TOML): scheduler, KV pool, tiers, eviction");
                   sub.add_option("--rates", a->rates, "rates file (ragctl plan --json output or a rates.json)")->required();
                   sub.add_option("--model", a->model, "HF model directory (its config.json gives the KV shape)");
                   sub.add_option("--preset", a->preset, "a preset's shape instead of a model (e.g. llama3-8b)");
                   sub.add_option("--workload", a->workload,
                                  "generator spec (key=value,...), a file of them, or trace:BENCH.json")
                       ->required();
                   sub.add_option("--replicas", a->replicas, "replicas, 1..4096 (default 1)")
                       ->each([a](const std::string&) { a->replicas_set = true; });
                   sub.add_option("--router", a->router, "leastconn | hash | kv-aware (default leastconn)");
                   sub.add_option("--set", a->sets, "key=value override of a fleet or workload key (repeatable)");
                   sub.add_option("--sweep", a->sweep, "key=a..b (doubling), key=a..b:step or key=v1,v2,...");
                   add_enum_option(sub, "--kv-dtype", &a->kv_dtype, "KV storage (default: the config's)")
                       ->each([a](const std::string&) { a->kv_dtype_set = true; });
                   sub.add_option("--slo-ttft-ms", a->slo_ttft_ms, "p99 TTFT SLO for the capacity of a rate sweep (default 1000)");
                   sub.add_flag("--no-itl", a->no_itl, "do not keep inter-token gaps (long runs: less memory)");
                   sub.add_option("--emit-workload", a->emit,
                                  "also write the generated requests as a `ragctl bench --workload` JSONL file");
                   sub.add_option("--retrieved", a->retrieved,
                                  "what the real retriever returned per request (bench/sim/retrieved.py JSONL): "
                                  "each request's documents and their lengths");
                   sub.add_option("--replications", a->replications,
                                  "run every point N times with seeded per-request noise and report each metric's "
                                  "median and p10-p90 over them (default 1: one deterministic run)")
                       ->check(CLI::Range(1, 100000));
                   sub.add_option("--seed", a->seed, "noise seed of the first replication (default 1; >= 1)")
                       ->check(CLI::Range(uint64_t{1}, UINT64_MAX));
                   sub.add_option("--real", a->real,
                                  "measured runs of the same requests (`ragctl bench --json`, one run per file; "
                                  "comma-separated or repeated): printed beside the prediction with their spread")
                       ->delimiter(',');
                   sub.add_option("--out", a->out, "HTML report");
                   sub.add_option("--json", a->json, "results as `ragctl bench --json` writes them");
                   return [a]() { return run_simulate(*a); };
                 });

}  // namespace
}  // namespace ragd::tools
