// ragctl calibrate --model DIR [--config ragd.toml] [--out rates.json] [--quick] [--port P]
//                  [--work-dir DIR] [--ragd PATH] [--pipelines DIR] [--source-dir DIR] [--python EXE]
//
// The simulator's rates for this machine, in one command (docs/design/simulator.md, "Calibrating a
// machine"): it measures the kernel rates (`ragctl plan`) and the engine steps at serving shapes
// (`ragctl simulate-steps`), then runs a short real calibration against a ragd it starts and stops
// itself (a fresh daemon per run, by PID, on a loopback port, data in a temp dir): one client on
// mostly hits, on mostly misses and on the same misses without reuse, then the mostly-hit requests
// open loop at a light rate it picks from the service rate it just measured (kLightUtilisation of
// it, calibration_runs.h) and from 4 clients. bench/sim/calibrate.py fits the serving terms (the one
// implementation of the fit; clamps come back as "fit_warnings" with their raw values); then every
// calibration run is replayed in the simulator with the fitted rates and compared with what was
// measured (the self-check). The rates file it writes carries a "calibration" object: what ran
// (machine, model, loads, runs, wall time, the other processes' CPU load meanwhile), the fit's
// residuals and checks, the self-check, and every warning; `ragctl simulate` ignores it.
// --quick: one run of each kind and fewer step repetitions (tests; rates for a smoke test only).
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <simdjson.h>

#include "bench_report.h"
#include "calibration_runs.h"
#include "child_process.h"
#include "command.h"
#include "env_or.h"
#include "ragd/common/json_writer.h"
#include "ragd/common/text_file.h"
#include "ragd/daemon/config.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/kernels/kv_dtype.h"
#include "ragd/pipelines/pipeline_spec.h"
#include "ragd/retrieval/corpus.h"
#include "ragd/sim/cost_model.h"

#ifndef RAGD_SOURCE_DIR
#define RAGD_SOURCE_DIR "."
#endif

namespace ragd::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct CalibArgs {
  std::string model = env_or("RAGD_MODEL", "./data/model");
  std::string config;  // daemon TOML for the runs and the simulations; "" = ragd's defaults
  std::string out = "rates.json";
  bool quick = false;
  int port = 0;  // 0: a free one, picked by ragd
  std::string work_dir;  // "" = a temp dir, removed after a successful calibration
  std::string ragd;      // "" = the ragd beside this ragctl
  std::string source_dir = RAGD_SOURCE_DIR;  // bench/sim/calibrate.py, bench/sim/validation/*.jsonl
  std::string pipelines;                     // "" = SOURCE/configs/pipelines
  std::string python = "python3";
};

// The calibration requests (bench/sim/validation, README there): generated on the synthetic corpora
// of `ragctl bench --ingest-synthetic --topics N`, with other seeds than the validation's workloads.
struct Workload {
  const char* name;
  const char* file;
  int topics;
  const char* what;
};
constexpr Workload kHit{"hit", "calib-hit.jsonl", 12, "mostly cache hits (12-topic corpus, Zipf 0.9)"};
constexpr Workload kMiss{"miss", "calib-miss.jsonl", 200, "mostly misses, each publishing (200-topic corpus)"};
constexpr Workload kMissNone{"miss-none", "calib-miss-none.jsonl", 200, "the same misses without reuse (qa-none)"};

// One kind of run; `open` runs at the light rate, else `clients` closed-loop clients.
struct RunKind {
  const char* name;
  const Workload* workload;
  int clients;
  bool open;
  const char* role;  // what the fit takes from it
};
constexpr RunKind kHitC1{"hit-c1", &kHit, 1, false, "one-client line and wake-up"};
constexpr RunKind kMissNoneC1{"miss-none-c1", &kMissNone, 1, false, "one-client line and step noise"};
constexpr RunKind kMissC1{"miss-c1", &kMiss, 1, false, "publication cost"};
constexpr RunKind kHitOpen{"hit-open", &kHit, 0, true, "wake-up after idling (its hits)"};
constexpr RunKind kHitC4{"hit-c4", &kHit, 4, false, "serving work per streamed row; check"};
constexpr const RunKind* kKinds[] = {&kHitC1, &kMissNoneC1, &kMissC1, &kHitOpen, &kHitC4};

struct Run {
  const RunKind* kind = nullptr;
  int repeat = 0;
  std::string path;  // bench JSON
  double load_before = 0;
  BenchResult result;
};

// /proc/loadavg's three averages; zeros where unreadable.
std::vector<double> load_averages() {
  std::ifstream in("/proc/loadavg");
  std::vector<double> v(3, 0.0);
  in >> v[0] >> v[1] >> v[2];
  return v;
}

// CPU seconds the whole machine spent busy (/proc/stat) and this process with its waited-for
// descendants spent (getrusage): their difference over a span is the other processes' load.
struct CpuClock {
  double machine_busy_s = 0, own_s = 0;
  Clock::time_point at = Clock::now();
};
CpuClock cpu_clock() {
  CpuClock c;
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  const double hz = static_cast<double>(::sysconf(_SC_CLK_TCK));
  if (cpu == "cpu" && hz > 0) c.machine_busy_s = (user + nice + system + irq + softirq + steal) / hz;
  auto secs = [](const rusage& r) {
    return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) + (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
  };
  rusage self{}, children{};
  ::getrusage(RUSAGE_SELF, &self);
  ::getrusage(RUSAGE_CHILDREN, &children);
  c.own_s = secs(self) + secs(children);
  return c;
}

int cpu_count() {
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// A shell word for calibrate.py's --*-sim options (it splits them with shlex).
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,+@") ==
                        std::string::npos)
    return s;
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The queries of a bench workload file, in order.
Result<std::vector<std::string>> workload_queries(const std::string& path) {
  RAGD_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  std::vector<std::string> out;
  simdjson::dom::parser parser;
  std::istringstream lines(text);
  int no = 0;
  for (std::string line; std::getline(lines, line);) {
    ++no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    simdjson::dom::element doc;
    std::string_view q;
    if (parser.parse(line).get(doc) || doc["query"].get(q))
      return Status::InvalidArgument(path + ":" + std::to_string(no) + ": expected {\"query\": string, ...}");
    out.emplace_back(q);
  }
  return out;
}

// What the daemon's retriever returns for each query, as `ragctl simulate --retrieved` reads it
// (bench/sim/retrieved.py, here in process): the top `k` chunks by score (ties by chunk id), in
// prompt order (by chunk id), each with its tokens plus the separator's.
Result<std::string> retrieved_lists(const std::string& data_dir, const std::vector<std::string>& queries,
                                    const pipelines::PipelineSpec& spec, int sep_tokens) {
  retrieval::CorpusOptions o;
  o.read_only = true;
  o.embedder.model_dir = "";
  RAGD_ASSIGN_OR_RETURN(auto corpus, retrieval::Corpus::open(data_dir, o, nullptr));
  retrieval::SearchParams sp;
  sp.mode = spec.retrieval_mode;
  std::string out;
  for (const std::string& q : queries) {
    RAGD_ASSIGN_OR_RETURN(std::vector<retrieval::Hit> hits,
                          corpus->search(q, spec.top_k, retrieval::ReadScope::everything(), sp));
    std::stable_sort(hits.begin(), hits.end(), [](const retrieval::Hit& a, const retrieval::Hit& b) {
      return a.score != b.score ? a.score > b.score : a.chunk.id < b.chunk.id;
    });
    if (hits.size() > static_cast<size_t>(spec.top_k)) hits.resize(static_cast<size_t>(spec.top_k));
    std::sort(hits.begin(), hits.end(), [](const retrieval::Hit& a, const retrieval::Hit& b) { return a.chunk.id < b.chunk.id; });
    out += "{\"docs\": [";
    for (size_t i = 0; i < hits.size(); ++i)
      out += (i ? ", [" : "[") + std::to_string(hits[i].chunk.id) + ", " +
             std::to_string(hits[i].chunk.token_end - hits[i].chunk.token_begin + static_cast<uint64_t>(sep_tokens)) + "]";
    out += "]}\n";
  }
  return out;
}

// A number member of a JSON object; 0 when it is missing or not a number.
double number(simdjson::dom::element obj, const char* key) {
  double v = 0;
  return obj[key].get_double().get(v) == simdjson::SUCCESS ? v : 0.0;
}

// The medians of a `ragctl simulate --replications N --json` result's first point.
Result<RunMetrics> replicated_medians(const std::string& path) {
  RAGD_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(text).get(doc)) return Status::InvalidArgument(path + ": not JSON");
  RunMetrics m;
  for (const char* name : kRunMetricNames) {
    double v = 0;
    if (doc.at_pointer(std::string("/replications/0/metrics/") + name + "/median").get_double().get(v))
      return Status::InvalidArgument(path + ": replications[0].metrics." + name + ".median missing");
    set_metric(&m, name, v);
  }
  return m;
}

class Calibration {
 public:
  explicit Calibration(CalibArgs a) : a_(std::move(a)) {}
  int run();

 private:
  void say(const std::string& line) {
    std::printf("[%6.1f s] %s\n", seconds_since(start_), line.c_str());
    std::fflush(stdout);
  }
  static double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  int fail(const Status& st) {
    std::fprintf(stderr, "ragctl calibrate: %s\n", st.to_string().c_str());
    if (!work_.empty()) std::fprintf(stderr, "ragctl calibrate: the runs so far are in %s\n", work_.c_str());
    return 1;
  }
  Status setup();
  Status child(const std::vector<std::string>& argv, const std::string& out, const std::string& what);
  Status measure();
  Status ingest(const Workload& w);
  std::vector<std::string> daemon_args(const Workload& w) const;
  Status real_run(const RunKind& kind, int repeat);
  Status fit();
  Status self_check();
  std::string calibration_json();
  std::vector<const Run*> runs_of(const RunKind& kind) const {
    std::vector<const Run*> out;
    for (const Run& r : runs_)
      if (r.kind == &kind) out.push_back(&r);
    return out;
  }
  std::string data_dir(const Workload& w) const { return work_ + "/data-" + std::to_string(w.topics); }
  std::vector<std::string> simulate_base() const {
    std::vector<std::string> v = {self_, "simulate", "--model", a_.model};
    if (!a_.config.empty()) v.insert(v.end(), {"--config", a_.config});
    return v;
  }
  // The replay of `kind`'s first run, as the fit and the self-check simulate it.
  std::vector<std::string> replay_args(const RunKind& kind) const;

  CalibArgs a_;
  Clock::time_point start_ = Clock::now();
  CpuClock cpu_start_;
  std::vector<double> load_before_;
  std::string started_utc_, self_, ragd_, work_, fit_script_;
  bool temp_work_ = false;
  int cpus_ = 1, reps_ = 2, step_reps_ = 15, replications_ = 20;
  daemon::DaemonConfig cfg_;
  engine::ModelConfig model_cfg_;
  pipelines::PipelineSpec spec_;
  int sep_tokens_ = 0, prefix_tokens_ = 0;
  double kv_bytes_per_token_ = 0;
  double service_rate_ = 0, light_rate_ = 0, run_speed_sd_ = 0;
  std::vector<Run> runs_;
  std::vector<std::pair<std::string, double>> phases_;  // name, seconds
  std::string plan_json_, fit_report_json_ = "{}";
  struct Replay {
    const RunKind* kind;
    std::vector<MetricCheck> checks;
  };
  std::vector<Replay> replays_;
  std::vector<std::string> warnings_;
  std::vector<double> busy_shares_;
};

Status Calibration::setup() {
  started_utc_ = utc_now();
  cpu_start_ = cpu_clock();
  load_before_ = load_averages();
  cpus_ = cpu_count();
  if (a_.quick) reps_ = 1, step_reps_ = 3, replications_ = 5;
  self_ = self_exe_path();
  if (self_.empty()) return Status::Internal("cannot find this executable (/proc/self/exe)");
  ragd_ = a_.ragd.empty() ? (fs::path(self_).parent_path() / "ragd").string() : a_.ragd;
  if (::access(ragd_.c_str(), X_OK) != 0) return Status::NotFound(ragd_ + ": no ragd to run (--ragd PATH)");
  fit_script_ = a_.source_dir + "/bench/sim/calibrate.py";
  std::error_code ec;
  if (!fs::exists(fit_script_, ec))
    return Status::NotFound(fit_script_ + " not found: give the source tree with --source-dir DIR");
  if (a_.port < 0 || a_.port > 65535) return Status::InvalidArgument("--port must be in [0, 65535]");
  auto mc = engine::ModelConfig::from_json_file(a_.model + "/config.json");
  if (!mc.ok()) return Status::InvalidArgument("--model: " + mc.status().message());
  model_cfg_ = *mc;
  if (!a_.config.empty()) RAGD_RETURN_IF_ERROR(daemon::load_config_file(cfg_, a_.config));
  // Work directory: the runs, corpora, daemon logs and the fit's files.
  if (a_.work_dir.empty()) {
    const fs::path tmp = fs::temp_directory_path(ec);
    std::string tmpl = ((ec ? fs::path("/tmp") : tmp) / "ragd-calibrate-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Status::IOError("cannot create " + tmpl);
    work_ = tmpl;
    temp_work_ = true;
  } else {
    work_ = fs::absolute(a_.work_dir, ec).string();
    if (fs::exists(work_ + "/runs", ec) && !fs::is_empty(work_ + "/runs", ec))
      return Status::AlreadyExists(work_ + "/runs holds runs already: give an empty --work-dir");
    fs::create_directories(work_, ec);
    if (ec) return Status::IOError(work_ + ": " + ec.message());
  }
  for (const char* d : {"runs", "pipelines", "sim"})
    if (fs::create_directories(work_ + "/" + d, ec); ec) return Status::IOError(work_ + "/" + d + ": " + ec.message());
  // The pipelines the calibration requests use, alone (no reranker copy of the model to load).
  const std::string pipes = a_.pipelines.empty() ? a_.source_dir + "/configs/pipelines" : a_.pipelines;
  for (const char* p : {"default.toml", "qa-none.toml"}) {
    std::error_code ec;
    fs::copy_file(pipes + "/" + p, work_ + "/pipelines/" + p, fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::NotFound(pipes + "/" + p + ": " + ec.message() + " (--pipelines DIR)");
  }
  auto spec = pipelines::load_pipeline_spec(work_ + "/pipelines/default.toml");
  if (!spec.ok()) return spec.status();
  spec_ = *spec;
  auto tok = engine::Tokenizer::from_file(a_.model + "/tokenizer.json");
  if (!tok.ok()) return Status::InvalidArgument("--model: " + tok.status().message());
  sep_tokens_ = static_cast<int>((*tok)->encode(spec_.separator, false, false).size());
  for (const Workload* w : {&kHit, &kMiss, &kMissNone}) {
    std::error_code ec;
    fs::copy_file(a_.source_dir + "/bench/sim/validation/" + w->file, work_ + "/" + w->file,
                  fs::copy_options::overwrite_existing, ec);
    if (ec) return Status::NotFound(a_.source_dir + "/bench/sim/validation/" + w->file + ": " + ec.message());
  }
  return Status::OK();
}

Status Calibration::child(const std::vector<std::string>& argv, const std::string& out, const std::string& what) {
  const std::string err = work_ + "/commands.log";
  {
    std::ofstream log(err, std::ios::app);
    log << "$";
    for (const std::string& s : argv) log << " " << shell_quote(s);
    log << "\n";
  }
  auto rc = run_child(argv, out, err);
  if (!rc.ok()) return Status::Internal(what + ": " + rc.status().message() + " (log: " + err + ")");
  if (*rc != 0) return Status::Internal(what + ": exit status " + std::to_string(*rc) + " (log: " + err + ")");
  return Status::OK();
}

Status Calibration::measure() {
  const std::string kv = std::string(kernels::kv_dtype_name(cfg_.runtime.model.kv_dtype));
  auto t = Clock::now();
  say("kernel rates (ragctl plan, " + std::to_string(cpus_) + " threads) ...");
  RAGD_RETURN_IF_ERROR(child({self_, "plan", "--model", a_.model, "--tokens", "1024", "--threads", std::to_string(cpus_),
                              "--workers", "1", "--kv-dtype", kv, "--json"},
                             work_ + "/plan.json", "ragctl plan"));
  phases_.emplace_back("kernel_rates", seconds_since(t));
  RAGD_ASSIGN_OR_RETURN(plan_json_, read_text_file(work_ + "/plan.json"));
  {
    simdjson::dom::parser p;
    simdjson::dom::element d;
    double dense = 0, attn = 0;
    if (p.parse(plan_json_).get(d) || d.at_pointer("/rates/dense_tokens_per_s").get(dense) ||
        d.at_pointer("/rates/attn_pairs_per_s").get(attn))
      return Status::Internal(work_ + "/plan.json: no rates");
    say("  dense " + fmt("%.0f", dense) + " tokens/s, attention " + fmt("%.3g", attn / 1e6) + " M pairs/s");
  }
  t = Clock::now();
  say("engine steps at serving shapes (ragctl simulate-steps, " + std::to_string(step_reps_) + " repetitions) ...");
  RAGD_RETURN_IF_ERROR(child({self_, "simulate-steps", "--model", a_.model, "--kv-dtype", kv, "--reps",
                              std::to_string(step_reps_), "--json", work_ + "/steps.json"},
                             work_ + "/steps.txt", "ragctl simulate-steps"));
  phases_.emplace_back("engine_steps", seconds_since(t));
  RAGD_ASSIGN_OR_RETURN(std::string steps, read_text_file(work_ + "/steps.json"));
  simdjson::dom::parser p;
  simdjson::dom::element d;
  if (p.parse(steps).get(d) || d["kv_bytes_per_token"].get(kv_bytes_per_token_) || kv_bytes_per_token_ <= 0)
    return Status::Internal(work_ + "/steps.json: no kv_bytes_per_token");
  double decode = 0, prefill = 0;
  simdjson::dom::array steps_arr;
  if (d["steps"].get(steps_arr)) return Status::Internal(work_ + "/steps.json: no steps");
  for (simdjson::dom::element s : steps_arr) {
    const double k = number(s, "decodes"), n = number(s, "prefill"), start = number(s, "start"), sec = number(s, "seconds");
    if (k == 1 && n == 0) decode = sec;
    if (k == 0 && n == 512 && start == 0) prefill = sec;
  }
  say("  one decode " + fmt("%.2f", decode * 1e3) + " ms, a 512-token prefill " + fmt("%.1f", prefill * 1e3) + " ms");
  return Status::OK();
}

std::vector<std::string> Calibration::daemon_args(const Workload& w) const {
  std::vector<std::string> v = {ragd_};
  if (!a_.config.empty()) v.insert(v.end(), {"--config", a_.config});
  v.insert(v.end(), {"--model", a_.model, "--data", data_dir(w), "--pipelines", work_ + "/pipelines", "--log-level", "warn"});
  return v;
}

Status Calibration::ingest(const Workload& w) {
  std::error_code ec;
  if (fs::exists(data_dir(w) + "/.ingested", ec)) return Status::OK();
  if (fs::create_directories(data_dir(w), ec); ec) return Status::IOError(data_dir(w) + ": " + ec.message());
  DaemonProcess d;
  RAGD_RETURN_IF_ERROR(d.start(daemon_args(w), static_cast<uint16_t>(a_.port), work_ + "/ragd.log"));
  RAGD_RETURN_IF_ERROR(child({self_, "bench", "--url", d.url(), "--ingest-synthetic", "--topics", std::to_string(w.topics),
                              "--requests", "1", "--concurrency", "1"},
                             work_ + "/ingest-" + std::to_string(w.topics) + ".txt", "ingest"));
  RAGD_RETURN_IF_ERROR(d.stop());
  std::ofstream(data_dir(w) + "/.ingested").put('\n');
  say("  corpus of " + std::to_string(w.topics) + " topics ingested");
  return Status::OK();
}

Status Calibration::real_run(const RunKind& kind, int repeat) {
  const Workload& w = *kind.workload;
  Run r;
  r.kind = &kind;
  r.repeat = repeat;
  r.path = work_ + "/runs/" + kind.name + "-" + std::to_string(repeat) + ".json";
  std::error_code ec;
  fs::remove_all(data_dir(w) + "/kvcache", ec);  // a fresh daemon with an empty KV cache
  r.load_before = load_averages()[0];
  DaemonProcess d;
  RAGD_RETURN_IF_ERROR(d.start(daemon_args(w), static_cast<uint16_t>(a_.port), work_ + "/ragd.log"));
  std::vector<std::string> bench = {self_, "bench", "--url", d.url(), "--workload", work_ + "/" + w.file, "--json", r.path};
  if (kind.open) bench.insert(bench.end(), {"--rate", fmt("%.4g", light_rate_)});
  else bench.insert(bench.end(), {"--concurrency", std::to_string(kind.clients)});
  const Status ran = child(bench, r.path.substr(0, r.path.size() - 5) + ".txt", std::string("run ") + kind.name);
  const Status stopped = d.stop();
  RAGD_RETURN_IF_ERROR(ran);
  RAGD_RETURN_IF_ERROR(stopped);
  RAGD_ASSIGN_OR_RETURN(r.result, load_bench_result(r.path));
  if (r.result.runs.size() != 1) return Status::Internal(r.path + ": expected one run");
  const BenchRun& br = r.result.runs[0];
  if (br.failed > 0)
    return Status::Unavailable(std::string("run ") + kind.name + ": " + std::to_string(br.failed) + " of " +
                               std::to_string(br.requests) + " requests failed (" + r.path + ")");
  const RunMetrics m = run_metrics(br);
  say("  " + std::string(kind.name) + " #" + std::to_string(repeat) + ": " + std::to_string(br.requests) + " requests, " +
      (kind.open ? fmt("%.3g req/s offered", light_rate_) : std::to_string(kind.clients) + (kind.clients == 1 ? " client" : " clients")) +
      ": TTFT p50 " + fmt("%.1f", m.ttft_p50_ms) + " ms, mean " + fmt("%.1f", m.ttft_mean_ms) + " ms, " +
      fmt("%.2f", m.req_per_s) + " req/s, hits " + fmt("%.1f", m.hit_pct) + " % of prompt tokens");
  runs_.push_back(std::move(r));
  return Status::OK();
}

std::vector<std::string> Calibration::replay_args(const RunKind& kind) const {
  std::vector<std::string> v = simulate_base();
  v.insert(v.end(), {"--workload", "trace:" + runs_of(kind)[0]->path});
  // Without retrieved lists a replayed request has no document ids: no reuse, as with qa-none.
  if (kind.workload != &kMissNone) {
    v.insert(v.end(), {"--retrieved", work_ + "/" + kind.workload->name + ".retrieved.jsonl"});
    if (prefix_tokens_ > 0) v.insert(v.end(), {"--set", "prefix_tokens=" + std::to_string(prefix_tokens_)});
  }
  if (!kind.open) v.insert(v.end(), {"--set", "concurrency=" + std::to_string(kind.clients)});
  return v;
}

Status Calibration::fit() {
  // What the real retriever returned for each request, and the prompt head's length.
  for (const Workload* w : {&kHit, &kMiss}) {
    RAGD_ASSIGN_OR_RETURN(auto queries, workload_queries(work_ + "/" + w->file));
    RAGD_ASSIGN_OR_RETURN(std::string lists, retrieved_lists(data_dir(*w), queries, spec_, sep_tokens_));
    RAGD_RETURN_IF_ERROR(write_text_file(work_ + "/" + w->name + ".retrieved.jsonl", lists));
  }
  prefix_tokens_ = prefix_tokens(runs_of(kMissC1)[0]->result.runs[0]);
  if (prefix_tokens_ == 0)
    warnings_.push_back("no request of the mostly-miss run reused anything: the prompt head's length is the simulator's default");
  auto paths = [&](const RunKind& k) {
    std::string s;
    for (const Run* r : runs_of(k)) s += (s.empty() ? "" : ",") + r->path;
    return s;
  };
  auto joined = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : " ") + shell_quote(x);
    return s;
  };
  const std::string source = "ragctl calibrate on this machine (" + std::to_string(cpus_) + " CPUs" +
                             (cpu_model().empty() ? "" : ", " + cpu_model()) + "), " + started_utc_ +
                             ": kernel rates and engine steps measured, serving fitted by bench/sim/calibrate.py";
  // The run-to-run speed over the repeated closed-loop runs (the open-loop run's times carry its
  // queueing too).
  std::vector<std::vector<const BenchRun*>> groups;
  for (const RunKind* k : {&kHitC1, &kMissNoneC1, &kMissC1, &kHitC4}) {
    auto& g = groups.emplace_back();
    for (const Run* r : runs_of(*k)) g.push_back(&r->result.runs[0]);
  }
  run_speed_sd_ = run_speed_sd(groups);
  say("  run-to-run speed: sd of log run time " + fmt("%.3f", run_speed_sd_) +
      (reps_ > 1 ? " over " + std::to_string(reps_) + " runs of each closed-loop kind" : " (one run of each: none)"));
  const std::vector<std::string> argv = {
      a_.python, fit_script_, work_ + "/plan.json", paths(kHitC1) + "," + paths(kMissNoneC1),
      fmt("%.0f", kv_bytes_per_token_), std::to_string(cfg_.runtime.scheduler.max_batch_tokens), "measured",
      "--steps", work_ + "/steps.json",
      "--publish", paths(kMissC1), "--publish-sim", joined(replay_args(kMissC1)),
      "--wake", paths(kHitOpen), "--wake-sim", joined(replay_args(kHitOpen)),
      "--rows", paths(kHitC4), "--rows-sim", joined(replay_args(kHitC4)),
      "--check", paths(kHitC4), "--check-sim", joined(replay_args(kHitC4)),
      "--wake-open", "--report", work_ + "/fit-report.json", "--source", source,
      "--run-speed-sd", fmt("%.4f", run_speed_sd_)};
  say("fit (bench/sim/calibrate.py) ...");
  auto t = Clock::now();
  const std::string log = work_ + "/fit.log";
  {
    std::ofstream l(work_ + "/commands.log", std::ios::app);
    l << "$";
    for (const std::string& s : argv) l << " " << shell_quote(s);
    l << " > " << work_ << "/rates.json 2> " << log << "\n";
  }
  auto rc = run_child(argv, work_ + "/rates.json", log);
  phases_.emplace_back("fit", seconds_since(t));
  if (!rc.ok() || *rc != 0) {
    std::string tail;
    if (auto text = read_text_file(log); text.ok()) tail = text->size() > 2000 ? text->substr(text->size() - 2000) : *text;
    return Status::Internal("the fit failed (" + (rc.ok() ? "exit status " + std::to_string(*rc) : rc.status().message()) +
                            "); " + log + ":\n" + tail);
  }
  RAGD_ASSIGN_OR_RETURN(fit_report_json_, read_text_file(work_ + "/fit-report.json"));
  // The fit's own lines: the step checks' summary, the line, the fitted and checked means.
  if (auto text = read_text_file(log); text.ok()) {
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("# mean TPOT", 0) == 0 || line.rfind("# wake-up", 0) == 0 || line.rfind("# steps:", 0) == 0)
        say("  " + line.substr(2));
  }
  simdjson::dom::parser p;
  simdjson::dom::element rep;
  if (p.parse(fit_report_json_).get(rep)) return Status::Internal(work_ + "/fit-report.json: not JSON");
  simdjson::dom::array warned;
  if (!rep["warnings"].get(warned))
    for (auto w : warned) {
      std::string_view term;
      if (w["term"].get(term)) term = "?";
      warnings_.push_back("fit: " + std::string(term) + " fitted as " + fmt("%.6g", number(w, "raw")) + ", clamped to " +
                          fmt("%g", number(w, "used")) +
                          " (the model does not describe this machine's measurements there)");
    }
  return Status::OK();
}

Status Calibration::self_check() {
  auto t = Clock::now();
  say("self-check: every calibration run replayed with the fitted rates (median of " + std::to_string(replications_) +
      " replications) against the runs' mean");
  std::printf("  %-13s %-21s %-21s %-21s %-17s %s\n", "run", "TTFT p50 ms", "TTFT mean ms", "req/s", "hit %",
              "TTFT p99 ms (shown)");
  for (const RunKind* kind : kKinds) {
    std::vector<std::string> argv = replay_args(*kind);
    const std::string out = work_ + "/sim/" + kind->name + ".json";
    argv.insert(argv.end(), {"--rates", work_ + "/rates.json", "--replications", std::to_string(replications_), "--seed", "1",
                             "--json", out});
    RAGD_RETURN_IF_ERROR(child(argv, work_ + "/sim/" + kind->name + ".txt", std::string("replay of ") + kind->name));
    RAGD_ASSIGN_OR_RETURN(RunMetrics sim, replicated_medians(out));
    std::vector<RunMetrics> real;
    for (const Run* r : runs_of(*kind)) real.push_back(run_metrics(r->result.runs[0]));
    Replay rp{kind, compare_metrics(mean_metrics(real), sim)};
    auto cell = [&](const char* name) {
      for (const MetricCheck& c : rp.checks)
        if (c.metric == name) {
          const bool pts = c.metric == "hit_pct";
          std::string s = fmt(pts || c.metric == "req_per_s" ? "%.2f" : "%.1f", c.measured) + " / " +
                          fmt(pts || c.metric == "req_per_s" ? "%.2f" : "%.1f", c.simulated) + " (" +
                          (pts ? fmt("%+.1f", c.error) : fmt("%+.0f %%", c.error * 100)) + (c.within ? ")" : ")*");
          return s;
        }
      return std::string();
    };
    std::printf("  %-13s %-21s %-21s %-21s %-17s %s\n", kind->name, cell("ttft_p50_ms").c_str(), cell("ttft_mean_ms").c_str(),
                cell("req_per_s").c_str(), cell("hit_pct").c_str(), cell("ttft_p99_ms").c_str());
    for (const MetricCheck& c : rp.checks)
      if (!c.within)
        warnings_.push_back(std::string("self-check: ") + kind->name + " " + c.metric + " simulated " + fmt("%.4g", c.simulated) +
                            " against " + fmt("%.4g", c.measured) + " measured (" +
                            (c.metric == "hit_pct" ? fmt("%+.1f points", c.error) : fmt("%+.1f %%", c.error * 100)) + ")");
    replays_.push_back(std::move(rp));
  }
  std::fflush(stdout);
  phases_.emplace_back("self_check", seconds_since(t));
  return Status::OK();
}

std::string Calibration::calibration_json() {
  const CpuClock end = cpu_clock();
  const double wall = seconds_since(start_);
  const double span = std::chrono::duration<double>(end.at - cpu_start_.at).count();
  const double others = span > 0 ? std::max(0.0, (end.machine_busy_s - cpu_start_.machine_busy_s) - (end.own_s - cpu_start_.own_s)) / span : 0.0;
  if (others > 0.25 * cpus_)
    warnings_.push_back("other processes used " + fmt("%.2f", others) + " of the " + std::to_string(cpus_) +
                        " CPUs on average during the calibration: the rates carry that load");
  JsonWriter w;
  w.begin_object();
  w.key("command").value(std::string("ragctl calibrate") + (a_.quick ? " --quick" : ""));
  w.key("description")
      .value("kernel rates (ragctl plan) and engine steps at serving shapes (ragctl simulate-steps, " + std::to_string(step_reps_) +
             " repetitions) measured here; then, against a fresh ragd per run on this machine: one client on " + kHit.what +
             ", on " + kMiss.what + " and on " + kMissNone.what + "; the mostly-hit requests open loop at " +
             fmt("%.3g", light_rate_) + " req/s (" + fmt("%.0f", 100 * kLightUtilisation) +
             " % of the one-client service rate measured just before) and from 4 clients; " + std::to_string(reps_) +
             (reps_ == 1 ? " run" : " runs") + " of each; fitted by bench/sim/calibrate.py (measured steps, the wake-up from the "
             "open-loop hits, publication, serving work per streamed row); every run replayed with the fitted rates");
  w.key("started_utc").value(started_utc_);
  w.key("wall_s").value(wall);
  w.key("phases_s").begin_object();
  for (const auto& [name, s] : phases_) w.key(name).value(s);
  w.end_object();
  w.key("machine").begin_object();
  w.key("cpus").value(cpus_).key("cpu_model").value(cpu_model());
  w.key("load_average_before").begin_array();
  for (double v : load_before_) w.value(v);
  w.end_array();
  w.key("other_processes_cpus").value(others);
  w.end_object();
  w.key("model").begin_object();
  w.key("dir").value(a_.model).key("layers").value(model_cfg_.num_hidden_layers).key("hidden").value(model_cfg_.hidden_size);
  w.key("heads").value(model_cfg_.num_attention_heads).key("kv_heads").value(model_cfg_.num_key_value_heads);
  w.key("kv_bytes_per_token").value(kv_bytes_per_token_);
  w.end_object();
  w.key("config").value(a_.config.empty() ? "(ragd's defaults)" : a_.config);
  w.key("loads").begin_object();
  w.key("service_rate_per_s").value(service_rate_);
  w.key("light_utilisation").value(kLightUtilisation);
  w.key("light_rate_per_s").value(light_rate_);
  w.key("light_busy_arrivals").begin_array();
  for (double b : busy_shares_) w.value(b);
  w.end_array();
  w.key("clients").begin_array().value(1).value(4).end_array();
  w.end_object();
  w.key("prefix_tokens").value(prefix_tokens_);
  w.key("runs").begin_array();
  for (const Run& r : runs_) {
    const BenchRun& br = r.result.runs[0];
    const RunMetrics m = run_metrics(br);
    w.begin_object().key("name").value(std::string(r.kind->name) + "-" + std::to_string(r.repeat));
    w.key("workload").value(std::string(r.kind->workload->file) + ": " + r.kind->workload->what);
    w.key("role").value(r.kind->role);
    if (r.kind->open) w.key("rate_per_s").value(light_rate_);
    else w.key("clients").value(r.kind->clients);
    w.key("requests").value(br.requests).key("wall_s").value(br.wall_s).key("load_average_before").value(r.load_before);
    for (const char* name : kRunMetricNames) w.key(name).value(metric(m, name));
    w.end_object();
  }
  w.end_array();
  w.key("fit").raw(fit_report_json_);
  w.key("self_check").begin_array();
  for (const Replay& rp : replays_) {
    w.begin_object().key("run").value(rp.kind->name).key("replications").value(replications_).key("metrics").begin_object();
    for (const MetricCheck& c : rp.checks) {
      w.key(c.metric).begin_object().key("measured").value(c.measured).key("simulated").value(c.simulated);
      w.key(c.metric == "hit_pct" ? "error_points" : "error").value(c.error);
      if (c.counted) w.key("within_target").value(c.within);
      w.end_object();
    }
    w.end_object().end_object();
  }
  w.end_array();
  w.key("warnings").begin_array();
  for (const std::string& s : warnings_) w.value(s);
  w.end_array();
  w.end_object();
  return w.take();
}

int Calibration::run() {
  if (Status st = setup(); !st.ok()) return fail(st);
  std::printf("ragctl calibrate: model %s (%d layers, hidden %d), %d CPUs%s, load average %.2f before; work dir %s\n",
              a_.model.c_str(), model_cfg_.num_hidden_layers, model_cfg_.hidden_size, cpus_,
              cpu_model().empty() ? "" : (" (" + cpu_model() + ")").c_str(), load_before_[0], work_.c_str());
  if (load_before_[0] > 0.75 * cpus_)
    warnings_.push_back("load average " + fmt("%.2f", load_before_[0]) + " on " + std::to_string(cpus_) +
                        " CPUs before the calibration: the machine was busy");
  if (Status st = measure(); !st.ok()) return fail(st);
  auto t = Clock::now();
  say("real runs: a fresh ragd per run (" + ragd_ + ", loopback port " + (a_.port ? std::to_string(a_.port) : std::string("picked by ragd")) + ")");
  for (const Workload* w : {&kHit, &kMiss})
    if (Status st = ingest(*w); !st.ok()) return fail(st);
  for (int k = 1; k <= reps_; ++k) {
    for (const RunKind* kind : kKinds) {
      if (kind->open && light_rate_ == 0) {
        service_rate_ = one_client_service_rate({&runs_of(kHitC1)[0]->result.runs[0]});
        if (service_rate_ <= 0) return fail(Status::Internal("no finished request in the one-client run to measure the service rate"));
        light_rate_ = std::stod(fmt("%.3g", kLightUtilisation * service_rate_));
        say("  light load: " + fmt("%.3g", light_rate_) + " req/s (" + fmt("%.0f", 100 * kLightUtilisation) +
            " % of the one-client service rate, " + fmt("%.3g", service_rate_) + " req/s)");
      }
      if (Status st = real_run(*kind, k); !st.ok()) return fail(st);
      if (kind->open) {
        const double busy = busy_arrival_share(runs_.back().result.runs[0]);
        busy_shares_.push_back(busy);
        if (busy > kMaxBusyArrivals)
          warnings_.push_back("the light load was not light: " + fmt("%.0f", 100 * busy) + " % of the open-loop arrivals found "
                              "another request in flight (" + fmt("%.0f", 100 * kLightUtilisation) + " % expected)");
      }
    }
  }
  phases_.emplace_back("real_runs", seconds_since(t));
  if (Status st = fit(); !st.ok()) return fail(st);
  if (Status st = self_check(); !st.ok()) return fail(st);
  auto rates = read_text_file(work_ + "/rates.json");
  if (!rates.ok()) return fail(rates.status());
  auto text = append_json_members(*rates, "\"calibration\": " + calibration_json());
  if (!text.ok()) return fail(Status::Internal(work_ + "/rates.json: " + text.status().message()));
  // What `ragctl simulate --rates` will do with it.
  sim::ModelShape shape;
  shape.layers = model_cfg_.num_hidden_layers;
  shape.kv_heads = model_cfg_.num_key_value_heads;
  shape.head_dim = model_cfg_.head_dim;
  shape.kv_dtype_bytes = static_cast<int>(kernels::kv_dtype_bytes(cfg_.runtime.model.kv_dtype));
  if (auto cm = sim::parse_cost_model(*text, shape); !cm.ok())
    return fail(Status::Internal("the rates written would not be accepted: " + cm.status().message()));
  if (Status st = write_text_file(a_.out, *text); !st.ok()) return fail(st);
  for (const std::string& s : warnings_) std::printf("warning: %s\n", s.c_str());
  say("wrote " + a_.out + " (" + std::to_string(warnings_.size()) + (warnings_.size() == 1 ? " warning" : " warnings") + ")");
  if (temp_work_) {
    std::error_code ec;
    fs::remove_all(work_, ec);
  }
  return 0;
}

Registration reg("calibrate",
                 "measure this machine and fit the simulator's rates: kernel rates, engine steps and short real runs "
                 "against a ragd it starts itself (writes a file for `ragctl simulate --rates`)",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<CalibArgs>();
                   sub.add_option("--model", a->model, "HF model directory (default $RAGD_MODEL or ./data/model)");
                   sub.add_option("--config", a->config,
                                  "daemon config (TOML) for the runs and the simulations (default: ragd's defaults)");
                   sub.add_option("--out", a->out, "rates file to write (default rates.json)");
                   sub.add_flag("--quick", a->quick,
                                "one run of each kind, 3 step repetitions, 5 replications in the self-check (tests)");
                   sub.add_option("--port", a->port, "loopback port of the daemons it starts (default 0: a free one)");
                   sub.add_option("--work-dir", a->work_dir,
                                  "keep the runs, corpora, logs and fit files here (default: a temp dir, removed on success)");
                   sub.add_option("--ragd", a->ragd, "the ragd to run (default: the one beside this ragctl)");
                   sub.add_option("--pipelines", a->pipelines,
                                  "pipelines directory with default.toml and qa-none.toml (default SOURCE/configs/pipelines)");
                   sub.add_option("--source-dir", a->source_dir,
                                  "source tree: bench/sim/calibrate.py and the calibration requests (default: this build's)");
                   sub.add_option("--python", a->python, "Python 3 interpreter for the fit (default python3)");
                   return [a]() { return Calibration(*a).run(); };
                 });

}  // namespace
}  // namespace ragd::tools
