// Output-length prediction and shortest-remaining-first scheduling, measured in process on the real
// Executor (no HTTP), with the simulator's prediction of the same table beside it.
//
//   bench_srtf [--out DIR] [--train N] [--requests N] [--loads 0.7,0.95] [--max-running R]
//              [--rounds K] [--threads T] [--hidden H] [--layers L] [--seed S] [--json FILE]
//              [--long-scale F] [--srtf-window STEPS] [--sim-only]
//
// --long-scale F multiplies the long kinds' length ranges (at most max_tokens 512); --srtf-window
// sets srtf's anti-starvation bound (SchedulerOptions::srtf_starvation_window); --sim-only skips
// the measured policy runs at each load and prints the simulator's rows alone (the training run,
// the prediction quality and the capacity run that fits the cost model still run).
//
// Model: a random-weight Llama-shaped model (--layers 8, --hidden 512) with a trained BPE tokenizer.
// Random weights never choose an answer's length, so the workload does: every request is a
// question of one of six kinds (short answers: "when did ...", "how many ...", "who wrote ...";
// long generations: "explain how ...", "list every ...", "summarize ..."), after a context of
// 8-48 filler words (independent of the kind). Each kind has a length range; 10 % of the requests
// take the length of another kind (the question does not fully decide the answer). The length is
// the run's hidden stop (RuntimeTestHooks::stop_after_tokens: the run ends there as if the model
// emitted its end-of-sequence token); every request asks max_tokens 512, and neither the scheduler
// nor the length features see the true length. Only "srtf (oracle)" is told it
// (RuntimeTestHooks::oracle_lengths, benchmarks only).
//
// Steps: (1) a training workload (seed S) runs through the executor with runtime.length_log set;
// the head is fitted on that log (the code of `ragctl length-train`) and written to DIR/head.txt.
// (2) Prediction quality on the test workload (seed S + 1, other questions): Kendall's tau, range
// accuracy and MAE of today's sjf estimate (trained on the same log, then replayed online) and of
// the head, at admission and after 16 generated tokens (remaining length, runs still going).
// (3) Capacity: a closed loop of max_running clients under fcfs. (4) For each load (a fraction of
// that capacity), the same Poisson arrivals under fcfs, sjf, srtf (head) and srtf (oracle), in K
// interleaved rounds (the policies one after the other, K times), each run behind a speed probe
// (probe_step_s: its arrivals stretched and its latencies divided by the machine's slowdown against
// the capacity run, so that drift between runs does not move a policy's load), each policy's
// requests pooled over its rounds: TTFT and end-to-end latency p50 / p99 and mean; and the ratios
// of each round (the four policies back to back) with their median over the rounds. (5) The simulator on the same requests (arrival times,
// prompt lengths, hidden lengths, questions) and the same scheduler options and head, with a cost
// model fitted here (step = a + b * tokens, from one-client and max_running-client decode gaps).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ragd/common/text_file.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/random_weights.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/length_log.h"
#include "ragd/pipelines/length_model.h"
#include "ragd/pipelines/length_predictor.h"
#include "ragd/pipelines/length_quality.h"
#include "ragd/pipelines/runtime.h"
#include "ragd/sim/simulator.h"
#include "../tools/ragctl/synthetic_words.h"
#include "bench_args.h"
#include "bench_files.h"
#include "random_model_dir.h"
#include "run_client.h"

namespace fs = std::filesystem;
using namespace ragd;
using namespace ragd::pipelines;
using ragd::bench::write_file;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kMaxTokens = 512;


struct Kind {
  const char* prefix;
  const char* suffix;
  int lo, hi;  // answer length range (tokens)
  double weight;
};
const Kind kKinds[] = {
    {"when did the", "happen", 3, 8, 0.25},         {"how many", "are there", 2, 6, 0.25},
    {"who wrote the", "report", 4, 12, 0.20},      {"explain how the", "works", 48, 96, 0.12},
    {"list every", "in the report", 96, 192, 0.10}, {"summarize the", "report", 64, 128, 0.08},
};

struct Req {
  std::string id, prompt, question;
  int length = 0;  // hidden stop
  double arrival_s = 0;
};

// --long-scale: the long kinds' length ranges times this factor (at most kMaxTokens).
double g_long_scale = 1.0;

std::vector<Req> workload(int n, uint64_t seed, const std::string& tag) {
  std::mt19937_64 rng(seed);
  std::vector<double> w;
  for (const Kind& k : kKinds) w.push_back(k.weight);
  std::discrete_distribution<int> pick(w.begin(), w.end());
  std::vector<Req> v;
  for (int i = 0; i < n; ++i) {
    const int kind = pick(rng);
    const int len_kind = (rng() % 10 == 0) ? pick(rng) : kind;  // 10 %: another kind's length
    const Kind& k = kKinds[kind];
    const Kind& lk = kKinds[len_kind];
    Req q;
    q.id = tag + "-" + std::to_string(i);
    const std::string topic = tools::synthetic_topic_word(static_cast<int>(rng() % 40));
    q.question = std::string(k.prefix) + " " + topic + " " + k.suffix + "?";
    const int filler = 8 + static_cast<int>(rng() % 41);
    std::string ctx = "Context:";
    for (int j = 0; j < filler; ++j) {
      ctx += ' ';
      ctx += tools::kSyntheticFillerWords[rng() % std::size(tools::kSyntheticFillerWords)];
    }
    q.prompt = ctx + ".\nQuestion: " + q.question + "\nAnswer:";
    const bool long_kind = lk.lo > 16;
    const int lo = long_kind ? std::min(kMaxTokens, static_cast<int>(std::lround(lk.lo * g_long_scale))) : lk.lo;
    const int hi = long_kind ? std::min(kMaxTokens, static_cast<int>(std::lround(lk.hi * g_long_scale))) : lk.hi;
    q.length = lo + static_cast<int>(rng() % (hi - lo + 1));
    v.push_back(q);
  }
  return v;
}

struct Outcome {
  bool ok = false;
  int length = 0;  // the request's hidden length (its class in the report: short <= 16 tokens)
  double ttft_ms = 0, e2e_ms = 0;
  int prompt_tokens = 0, tokens = 0;
  std::vector<double> itl_ms;
};

Outcome run_one(Executor& ex, const Req& q) {
  RunRequest rr;
  rr.id = q.id;
  rr.prompt = q.prompt;
  rr.sampling.max_tokens = kMaxTokens;
  rr.sampling.ignore_eos = true;
  const bench::Observed o = bench::run_and_wait(ex, std::move(rr));
  return {o.ok, 0, o.ttft_ms, o.e2e_ms, o.usage.prompt_tokens, o.tokens, o.itl_ms};
}

std::vector<Outcome> closed_loop(Executor& ex, const std::vector<Req>& reqs, int clients, double* wall_s) {
  return bench::closed_loop<Outcome>(reqs, clients, [&](const Req& q) { return run_one(ex, q); }, wall_s);
}

std::vector<Outcome> open_loop(Executor& ex, const std::vector<Req>& reqs) {
  return bench::open_loop<Outcome>(reqs, [&](const Req& q) { return run_one(ex, q); }, nullptr);
}

// The machine's speed now: the median decode gap of max_running fixed 48-token generations run
// side by side, twice over (~100 engine steps at the serving batch), on the runtime about to be
// measured. This VM's speed drifts by 20-30 % over minutes; a policy run's arrivals are stretched
// by (its probe / the reference probe) and its latencies divided by the same factor, so that every
// policy is measured at the same load relative to the machine's speed at the time.
double probe_step_s(Executor& ex, const Req& like, int max_running, const std::string& tag,
                    const std::function<void(const std::vector<Req>&)>& remember) {
  std::vector<Req> probe;
  for (int i = 0; i < 2 * max_running; ++i) {
    Req q = like;
    q.id = tag + "-probe-" + std::to_string(i);
    q.length = 48;
    probe.push_back(q);
  }
  remember(probe);
  std::vector<double> gaps;
  for (const Outcome& o : closed_loop(ex, probe, max_running, nullptr))
    gaps.insert(gaps.end(), o.itl_ms.begin() + std::min<size_t>(o.itl_ms.size(), 4), o.itl_ms.end());
  return bench::percentile(gaps, 50) / 1e3;
}

struct Row {
  double ttft_p50 = 0, ttft_p99 = 0, e2e_p50 = 0, e2e_p99 = 0, e2e_mean = 0;
  double short_mean = 0, long_mean = 0;  // mean e2e of requests of <= 16 tokens, of the others
  int failed = 0;
};

Row summarize(const std::vector<double>& ttft, const std::vector<double>& e2e, int failed) {
  Row r;
  r.ttft_p50 = bench::percentile(ttft, 50);
  r.ttft_p99 = bench::percentile(ttft, 99);
  r.e2e_p50 = bench::percentile(e2e, 50);
  r.e2e_p99 = bench::percentile(e2e, 99);
  for (double x : e2e) r.e2e_mean += x / std::max<size_t>(1, e2e.size());
  r.failed = failed;
  return r;
}

Row summarize(const std::vector<Outcome>& os) {
  std::vector<double> ttft, e2e;
  int failed = 0, n_short = 0, n_long = 0;
  double s_short = 0, s_long = 0;
  for (const Outcome& o : os) {
    if (!o.ok) {
      ++failed;
      continue;
    }
    ttft.push_back(o.ttft_ms);
    e2e.push_back(o.e2e_ms);
    (o.length <= 16 ? s_short : s_long) += o.e2e_ms;
    ++(o.length <= 16 ? n_short : n_long);
  }
  Row r = summarize(ttft, e2e, failed);
  r.short_mean = n_short ? s_short / n_short : 0;
  r.long_mean = n_long ? s_long / n_long : 0;
  return r;
}

Row summarize(const sim::SimResult& r) {
  std::vector<double> ttft, e2e;
  int failed = 0;
  for (const auto& x : r.records) {
    if (!x.ok) {
      ++failed;
      continue;
    }
    ttft.push_back(x.ttft_ms);
    e2e.push_back(x.e2e_ms);
  }
  return summarize(ttft, e2e, failed);
}

struct Policy {
  const char* name;
  SchedPolicy policy;
  bool head, oracle;
};
const Policy kPolicies[] = {{"fcfs", SchedPolicy::kFcfs, false, false},
                            {"sjf (today)", SchedPolicy::kSjf, false, false},
                            {"srtf (head)", SchedPolicy::kSrtf, true, false},
                            {"srtf (oracle)", SchedPolicy::kSrtf, false, true}};

struct Quality {
  double tau = 0, acc = 0, mae = 0;
};
Quality quality(const std::vector<double>& p, const std::vector<double>& a, const std::vector<int>& edges) {
  return {kendall_tau(p, a), range_accuracy(p, a, edges), mean_abs_error(p, a)};
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string out_dir = (fs::temp_directory_path() / "ragd_bench_srtf").string();
  std::string json_path;
  int n_train = 400, n_req = 160, max_running = 4, threads = 1, hidden = 512, layers = 8, rounds = 2;
  uint64_t seed = 1;
  int srtf_window = -1;  // --srtf-window: srtf's anti-starvation bound in steps; -1: the scheduler's default
  bool sim_only = false;
  std::vector<double> loads = {0.7, 0.95};
  bench::BenchArgs args("bench_srtf");
  args.opt("out", &out_dir).opt("train", &n_train).opt("requests", &n_req).list("loads", &loads);
  args.opt("max-running", &max_running).opt("threads", &threads).opt("seed", &seed).opt("json", &json_path);
  args.opt("hidden", &hidden).opt("layers", &layers).opt("rounds", &rounds);
  args.opt("long-scale", &g_long_scale).opt("srtf-window", &srtf_window).flag("sim-only", &sim_only);
  if (!args.parse(argc, argv)) return 2;
  fs::remove_all(out_dir);
  fs::create_directories(out_dir);
  const std::string model = out_dir + "/model", log_path = out_dir + "/runs.jsonl", head_path = out_dir + "/head.txt";
  if (hidden < 64 || hidden % 64 != 0 || layers < 1) {
    std::fprintf(stderr, "--hidden must be a multiple of 64, --layers >= 1\n");
    return 2;
  }
  if (!bench::make_random_model_dir(model, hidden, layers)) {
    std::fprintf(stderr, "cannot write the model\n");
    return 1;
  }
  RuntimeOptions base;
  base.model_dir = model;
  base.model.kv_pool_bytes = 256ull << 20;  // no KV shortage: preemptions are the policy's
  base.scheduler.max_batch_tokens = 256;
  base.scheduler.max_running = max_running;
  if (srtf_window > 0) base.scheduler.srtf_starvation_window = srtf_window;
  base.model.num_threads = threads;
  base.hbm_cache = false;  // plain prompts: nothing to reuse, keep every run's cost the same
  base.kv.ssd_bytes = 0;
  std::map<std::string, int> stops;  // run id -> length (the stop rule), read by the hook
  std::mutex hidden_mu;
  base.test_hooks.stop_after_tokens = [&](const std::string& id) {
    std::lock_guard<std::mutex> lk(hidden_mu);
    auto it = stops.find(id);
    return it == stops.end() ? 0 : it->second;
  };
  auto remember = [&](const std::vector<Req>& reqs) {
    std::lock_guard<std::mutex> lk(hidden_mu);
    for (const Req& q : reqs) stops[q.id] = q.length;
  };

  // (1) Training run with the length log on, then the head.
  const std::vector<Req> train = workload(n_train, seed, "train");
  remember(train);
  {
    RuntimeOptions o = base;
    o.length_log = log_path;
    auto rt = open_runtime(o);
    if (!rt.ok()) {
      std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
      return 1;
    }
    double wall = 0;
    closed_loop(*rt->executor, train, max_running, &wall);
    rt->stop();
    std::printf("training run: %d requests in %.1f s, log %s\n", n_train, wall, log_path.c_str());
  }
  auto log_text = read_text_file(log_path, "length log");
  if (!log_text.ok()) return 1;
  auto samples = parse_length_log(*log_text, log_path);
  if (!samples.ok()) {
    std::fprintf(stderr, "%s\n", samples.status().to_string().c_str());
    return 1;
  }
  const LengthTrainOptions topts;
  const auto t_fit = Clock::now();
  auto head = LengthModel::train(*samples, topts);
  if (!head.ok() || !(*head)->save(head_path).ok()) {
    std::fprintf(stderr, "cannot fit or write the head\n");
    return 1;
  }
  std::printf("head fitted on %zu logged runs in %.2f s: %s\n\n", samples->size(),
              std::chrono::duration<double>(Clock::now() - t_fit).count(), head_path.c_str());

  // (2) Prediction quality on the test workload.
  std::vector<Req> test = workload(n_req, seed + 1, "test");
  const size_t cal_n = static_cast<size_t>(n_req);  // the capacity run's requests
  remember(test);
  OutputLengthPredictor today;
  for (const auto& s : *samples) today.observe(s.features.pipeline, s.features.prompt_tokens, s.features.max_tokens, s.output_tokens);
  // Prompt lengths as the executor counts them: measured in the capacity run below; the features
  // need them now, so tokenize the same way the executor does (BOS + prompt).
  auto tok = engine::Tokenizer::from_file(model + "/tokenizer.json");
  if (!tok.ok()) return 1;
  std::vector<int> prompt_tokens;
  for (const Req& q : test) prompt_tokens.push_back(static_cast<int>((*tok)->encode(q.prompt, true).size()));
  std::vector<double> p_today, p_head, actual, r_head16, r_today16, actual16;
  for (size_t i = 0; i < test.size(); ++i) {
    const LengthFeatures f{"", length_prompt_text(test[i].prompt), prompt_tokens[i], kMaxTokens};
    const double t = today.predict("", prompt_tokens[i], kMaxTokens);
    p_today.push_back(t);
    today.observe("", prompt_tokens[i], kMaxTokens, test[i].length);
    const auto probs = (*head)->probabilities(f);
    p_head.push_back((*head)->remaining(probs, 0, kMaxTokens));
    actual.push_back(test[i].length);
    if (test[i].length > 16) {
      r_head16.push_back((*head)->remaining(probs, 16, kMaxTokens));
      r_today16.push_back(std::max(1.0, t - 16));
      actual16.push_back(test[i].length - 16);
    }
  }
  const Quality qt = quality(p_today, actual, topts.edges), qh = quality(p_head, actual, topts.edges);
  const Quality qt16 = quality(r_today16, actual16, topts.edges), qh16 = quality(r_head16, actual16, topts.edges);
  std::printf("## Output-length prediction, %d test requests (lengths %d-%d, max_tokens %d for all)\n\n", n_req,
              kKinds[1].lo, std::min(kMaxTokens, static_cast<int>(std::lround(kKinds[4].hi * g_long_scale))), kMaxTokens);
  std::printf("| predictor | Kendall's tau | range accuracy | MAE tokens | tau of remaining after 16 tokens (%zu runs) |\n|---|---|---|---|---|\n",
              actual16.size());
  std::printf("| sjf estimate (today) | %.3f | %.1f %% | %.1f | %.3f |\n", qt.tau, 100 * qt.acc, qt.mae, qt16.tau);
  std::printf("| length head | %.3f | %.1f %% | %.1f | %.3f |\n\n", qh.tau, 100 * qh.acc, qh.mae, qh16.tau);

  // (3) Capacity and the cost model's two points.
  double capacity = 1, itl1 = 0, itlB = 0;
  double ref_probe = 0;  // the speed probe around the capacity run (probe_step_s)
  std::vector<std::pair<int, double>> prefill_points;  // (prompt tokens, seconds)
  {
    auto rt = open_runtime(base);
    if (!rt.ok()) return 1;
    std::vector<Req> longs;
    for (const Req& q : test)
      if (q.length >= 48 && longs.size() < static_cast<size_t>(2 * max_running)) longs.push_back(q);
    double wall = 0;
    std::vector<double> g1, gB;
    for (size_t i = 0; i < 3 && i < longs.size(); ++i) {
      const Outcome o = run_one(*rt->executor, longs[i]);
      g1.insert(g1.end(), o.itl_ms.begin(), o.itl_ms.end());
    }
    for (const Outcome& o : closed_loop(*rt->executor, longs, max_running, &wall))
      gB.insert(gB.end(), o.itl_ms.begin() + std::min<size_t>(o.itl_ms.size(), 4), o.itl_ms.end());
    itl1 = bench::percentile(g1, 50) / 1e3;
    itlB = bench::percentile(gB, 50) / 1e3;
    // Prefill steps: an idle engine's TTFT at two prompt lengths (one request at a time).
    for (int words : {24, 160}) {
      Req q = longs.front();
      q.id = "prefill-" + std::to_string(words);
      q.prompt = "Context:";
      for (int j = 0; j < words; ++j) q.prompt += std::string(" ") + tools::kSyntheticFillerWords[j % std::size(tools::kSyntheticFillerWords)];
      remember({q});
      std::vector<double> ttft;
      int ptoks = 0;
      for (int rep = 0; rep < 5; ++rep) {
        q.id = "prefill-" + std::to_string(words) + "-" + std::to_string(rep);
        remember({q});
        const Outcome o = run_one(*rt->executor, q);
        ttft.push_back(o.ttft_ms / 1e3);
        ptoks = o.prompt_tokens;
      }
      prefill_points.emplace_back(ptoks, bench::percentile(ttft, 50));
    }
    // The whole test mix: with long generations 30x the short answers, the first 80 requests'
    // capacity can be 10-20 % off the mix the loads are fractions of.
    const std::vector<Req> cal(test.begin(), test.begin() + std::min<size_t>(test.size(), cal_n));
    ref_probe = probe_step_s(*rt->executor, test.front(), max_running, "capacity", remember);
    closed_loop(*rt->executor, cal, max_running, &wall);
    capacity = cal.size() / wall;
    ref_probe = 0.5 * (ref_probe + probe_step_s(*rt->executor, test.front(), max_running, "capacity2", remember));
    rt->stop();
  }
  // The step time by tokens fed, measured: decode gaps at batch 1 and max_running, an idle
  // engine's TTFT at two prompt lengths; linear between them ("measured" dense curve), beyond the
  // last at its slope.
  std::vector<std::pair<int, double>> curve = {{1, itl1}, {max_running, itlB}};
  curve.insert(curve.end(), prefill_points.begin(), prefill_points.end());
  std::sort(curve.begin(), curve.end());
  std::vector<std::pair<int, double>> dense;
  for (const auto& [tk, sec] : curve)
    if (dense.empty() || tk > dense.back().first) dense.emplace_back(tk, std::max(sec, dense.empty() ? 0.0 : dense.back().second));
  const auto& p1 = dense[dense.size() - 2];
  const auto& p2 = dense.back();
  const double slope = std::max(1e-7, (p2.second - p1.second) / (p2.first - p1.first));
  std::printf("capacity (closed loop, %d clients, fcfs): %.2f req/s; speed probe %.3f ms; step time (tokens: ms):",
              max_running, capacity, ref_probe * 1e3);
  for (const auto& [tk, sec] : dense) std::printf(" %d: %.2f", tk, sec * 1e3);
  std::printf("\n");
  sim::CostModel cost;
  cost.engine.decode_dense_s = dense.front().second;
  cost.engine.dense_tokens_per_s = 1.0 / slope;
  cost.serving.dense_curve = dense;
  cost.engine.attn_pairs_per_s = 1e13;
  cost.engine.masked_pairs_per_s = 1e13;
  cost.engine.kv_read_bytes_per_s = 1e13;
  cost.engine.link_bytes_per_s = 1e10;
  cost.serving.network_s = 0;
  cost.serving.retrieval_s = 0;
  cost.shape = sim::ModelShape{layers, std::max(1, hidden / 64), 32, 4};
  // One factor on the engine terms (serving.engine_slowdown) fitted so that the simulated closed
  // loop of the capacity run serves as many requests per second as the measured one did.
  std::vector<sim::SimRequest> cal_sim;
  for (size_t i = 0; i < std::min<size_t>(test.size(), cal_n); ++i) {
    sim::SimRequest s;
    s.id = i + 1;
    s.prompt_tokens = prompt_tokens[i];
    s.answer_tokens = test[i].length;
    s.max_tokens = kMaxTokens;
    cal_sim.push_back(s);
  }
  auto sim_options = [&](SchedPolicy policy) {
    sim::SimOptions so;
    so.kv.pool_blocks = 1 << 16;
    so.kv.block_size = 16;
    so.kv.hbm_cache = false;
    so.kv.dram_bytes = 0;
    so.kv.ssd_bytes = 0;
    so.keep_itl = false;
    so.max_concurrent_per_tenant = 0;
    so.scheduler.policy = policy;
    so.scheduler.max_batch_tokens = base.scheduler.max_batch_tokens;
    so.scheduler.max_running = max_running;
    so.scheduler.srtf_starvation_window = base.scheduler.srtf_starvation_window;
    return so;
  };
  auto sim_capacity = [&](double slowdown) {
    sim::CostModel c = cost;
    c.serving.engine_slowdown = slowdown;
    sim::SimOptions so = sim_options(SchedPolicy::kFcfs);
    so.closed_loop_clients = max_running;
    auto r = sim::simulate(so, c, cal_sim);
    return r.ok() && r->duration_s > 0 ? cal_sim.size() / r->duration_s : 0.0;
  };
  // In [-0.5, 4]: below zero when the measured step times above came out slower than the steps of
  // the capacity run (a busy moment of the machine).
  double lo = -0.5, hi = 4, slowdown = 0;  // the simulated capacity falls as the slowdown grows
  if (sim_capacity(lo) <= capacity) {
    slowdown = lo;
  } else if (sim_capacity(hi) >= capacity) {
    slowdown = hi;
  } else {
    for (int it = 0; it < 30; ++it) {
      const double mid = 0.5 * (lo + hi);
      (sim_capacity(mid) > capacity ? lo : hi) = mid;
    }
    slowdown = lo;
  }
  cost.serving.engine_slowdown = slowdown;
  std::printf("simulator: engine_slowdown %.3f fitted to the measured capacity (simulated %.2f req/s)\n\n", slowdown,
              sim_capacity(slowdown));

  // (4) + (5) Each load: the four policies, measured and simulated.
  std::string json = "{\"quality\":{\"today\":{\"tau\":" + std::to_string(qt.tau) + ",\"range_accuracy\":" + std::to_string(qt.acc) +
                     ",\"mae\":" + std::to_string(qt.mae) + "},\"head\":{\"tau\":" + std::to_string(qh.tau) +
                     ",\"range_accuracy\":" + std::to_string(qh.acc) + ",\"mae\":" + std::to_string(qh.mae) +
                     "}},\"capacity_rps\":" + std::to_string(capacity) + ",\"loads\":[";
  bool first_load = true;
  for (double load : loads) {
    const double rate = load * capacity;
    std::mt19937_64 arr(seed + 7);
    std::exponential_distribution<double> gap(rate);
    double t = 0;
    std::vector<Req> reqs = test;
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].arrival_s = (t += gap(arr));
      reqs[i].id = "load" + std::to_string(static_cast<int>(load * 100)) + "-" + std::to_string(i);
    }
    remember(reqs);
    std::vector<sim::SimRequest> sreqs;
    for (size_t i = 0; i < reqs.size(); ++i) {
      sim::SimRequest s;
      s.id = i + 1;
      s.arrival_s = reqs[i].arrival_s;
      s.prompt_tokens = prompt_tokens[i];
      s.answer_tokens = reqs[i].length;
      s.max_tokens = kMaxTokens;
      s.text = length_prompt_text(reqs[i].prompt);  // what the executor's scheduler reads
      sreqs.push_back(s);
    }
    std::printf("## Load %.0f %% of capacity: Poisson %.2f req/s, %d requests x %d rounds per policy, max_running %d\n\n",
                100 * load, rate, n_req, rounds, max_running);
    std::printf("| policy | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | e2e p99 ms | e2e mean ms | short / long e2e mean ms | preemptions | sim TTFT p50 | sim TTFT p99 | sim e2e p50 | sim e2e p99 | sim e2e mean |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    json += std::string(first_load ? "" : ",") + "{\"load\":" + std::to_string(load) + ",\"rate\":" + std::to_string(rate) + ",\"policies\":{";
    first_load = false;
    std::map<std::string, Row> measured, simulated;
    std::map<std::string, std::vector<Outcome>> pooled;
    std::map<std::string, std::vector<double>> round_mean;  // per round: the policy's normalised mean e2e
    std::map<std::string, long> preemptions;
    std::string speeds;
    for (int round = 0; round < (sim_only ? 0 : rounds); ++round)
      for (const Policy& p : kPolicies) {
        RuntimeOptions o = base;
        o.scheduler.policy = p.policy;
        if (p.head) o.length_model = head_path;
        o.scheduler.oracle_lengths = p.oracle;
        auto rt = open_runtime(o);
        if (!rt.ok()) {
          std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
          return 1;
        }
        const std::string tag = "l" + std::to_string(static_cast<int>(load * 100)) + "-r" + std::to_string(round) + "-" + p.name;
        const double f = probe_step_s(*rt->executor, test.front(), max_running, tag, remember) / ref_probe;
        std::vector<Req> scaled = reqs;
        for (Req& q : scaled) q.arrival_s *= f;
        std::vector<Outcome> os = open_loop(*rt->executor, scaled);
        for (size_t i = 0; i < os.size(); ++i) {
          os[i].length = reqs[i].length;
          os[i].ttft_ms /= f;
          os[i].e2e_ms /= f;
        }
        round_mean[p.name].push_back(summarize(os).e2e_mean);
        char buf[96];
        std::snprintf(buf, sizeof buf, "%s%s r%d %.2f", speeds.empty() ? "" : ", ", p.name, round + 1, f);
        speeds += buf;
        pooled[p.name].insert(pooled[p.name].end(), os.begin(), os.end());
        const ExecutorStats es = rt->executor->stats();
        preemptions[p.name] += es.swaps_out + es.drops;
        rt->stop();
      }
    if (!sim_only) std::printf("speed factors (probe / reference; arrivals stretched, latencies divided by it): %s\n\n", speeds.c_str());
    bool first = true;
    for (const Policy& p : kPolicies) {
      const Row m = summarize(pooled[p.name]);
      sim::SimOptions so = sim_options(p.policy);
      so.scheduler.oracle_lengths = p.oracle;
      if (p.head) so.scheduler.length_model = *head;
      auto sr = sim::simulate(so, cost, sreqs);
      if (!sr.ok()) {
        std::fprintf(stderr, "simulate: %s\n", sr.status().to_string().c_str());
        return 1;
      }
      const Row s = summarize(*sr);
      measured[p.name] = m;
      simulated[p.name] = s;
      std::printf("| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f / %.0f | %ld | %.0f | %.0f | %.0f | %.0f | %.0f |%s\n", p.name,
                  m.ttft_p50, m.ttft_p99, m.e2e_p50, m.e2e_p99, m.e2e_mean, m.short_mean, m.long_mean, preemptions[p.name],
                  s.ttft_p50, s.ttft_p99, s.e2e_p50,
                  s.e2e_p99, s.e2e_mean,
                  m.failed ? (" " + std::to_string(m.failed) + " failed").c_str() : "");
      auto row_json = [](const Row& r) {
        return "{\"ttft_p50_ms\":" + std::to_string(r.ttft_p50) + ",\"ttft_p99_ms\":" + std::to_string(r.ttft_p99) +
               ",\"e2e_p50_ms\":" + std::to_string(r.e2e_p50) + ",\"e2e_p99_ms\":" + std::to_string(r.e2e_p99) +
               ",\"e2e_mean_ms\":" + std::to_string(r.e2e_mean) + "}";
      };
      json += std::string(first ? "" : ",") + "\"" + p.name + "\":{\"measured\":" + row_json(m) + ",\"simulated\":" + row_json(s) + "}";
      first = false;
    }
    json += "}}";
    const double head_mean = measured["srtf (head)"].e2e_mean, oracle_mean = measured["srtf (oracle)"].e2e_mean,
                 fcfs_mean = measured["fcfs"].e2e_mean;
    if (sim_only) {
      std::printf("\nsimulated: srtf (head) mean e2e %.2fx the oracle's, fcfs / srtf (head) %.2fx\n\n",
                  simulated["srtf (head)"].e2e_mean / simulated["srtf (oracle)"].e2e_mean,
                  simulated["fcfs"].e2e_mean / simulated["srtf (head)"].e2e_mean);
      continue;
    }
    // Each round's ratios (the four policies ran back to back), and their median over the rounds.
    std::vector<double> r_oracle, r_fcfs;
    std::string per_round;
    for (int k = 0; k < rounds; ++k) {
      const double h = round_mean["srtf (head)"][k];
      r_oracle.push_back(h / round_mean["srtf (oracle)"][k]);
      r_fcfs.push_back(round_mean["fcfs"][k] / h);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%s%.2f / %.2f", k ? ", " : "", r_oracle.back(), r_fcfs.back());
      per_round += buf;
    }
    std::printf("\nsrtf (head) mean e2e: %.2fx the oracle's (target <= 1.20), fcfs / srtf (head) %.2fx (target >= 1.5 at the "
                "higher load); simulated: %.2fx, %.2fx\n",
                head_mean / oracle_mean, fcfs_mean / head_mean,
                simulated["srtf (head)"].e2e_mean / simulated["srtf (oracle)"].e2e_mean,
                simulated["fcfs"].e2e_mean / simulated["srtf (head)"].e2e_mean);
    std::printf("per round (head / oracle, fcfs / head): %s; median over %d rounds: %.2fx, %.2fx\n\n", per_round.c_str(),
                rounds, bench::percentile(r_oracle, 50), bench::percentile(r_fcfs, 50));
  }
  json += "]}";
  if (!json_path.empty()) write_file(json_path, json + "\n");
  return 0;
}
