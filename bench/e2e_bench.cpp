// End-to-end benchmark driving the Executor in process (no HTTP): KV reuse modes on a Zipf RAG
// workload, and scheduling policies on a mixed short/long workload. Everything is built here in
// a temp directory: a random-weight Llama-shaped model with a trained BPE tokenizer, a synthetic
// corpus ingested through the DocumentApi (RocksDB + FAISS), pipeline specs.
//
//   bench_e2e [--out DIR] [--requests N] [--topics T] [--zipf S] [--clients C] [--sched-requests N]
//             [--threads N] [--device cpu|cuda:N] [--json FILE]
//
// Reuse: T topics, 4 documents each (a topic word shared by its documents only), queries pick a
// topic with Zipf(S) popularity and ask about it with random filler words, so popular document
// sets recur with different questions. Each mode (none / prefix / knowledge_tree) runs the same
// request sequence, closed loop with C clients, on a freshly opened runtime (empty KV caches).
// Scheduling: Poisson arrivals at the measured closed-loop capacity, 75% short (4 tokens, tenant
// "interactive") and 25% long (96 tokens, tenant "batch") requests, the same sequence for
// fcfs / sjf / fair; p50/p99 TTFT per class.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ragd/engine/model_config.h"
#include "ragd/engine/random_weights.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/runtime.h"
#include "../tools/ragctl/synthetic_words.h"
#include "bench_args.h"
#include "bench_files.h"
#include "random_model_dir.h"
#include "run_client.h"

namespace fs = std::filesystem;
using namespace ragd;
using namespace ragd::pipelines;
using ragd::bench::write_file;
using ragd::tools::kSyntheticAskWords;
using ragd::tools::kSyntheticFillerWords;
using ragd::tools::synthetic_topic_word;
using Clock = std::chrono::steady_clock;

namespace {

// Question words (kSyntheticAskWords) occur in no document: the retrieved set depends on the topic
// word only.

std::vector<DocumentInput> synthetic_corpus(int topics, std::mt19937& rng) {
  std::vector<DocumentInput> docs;
  for (int t = 0; t < topics; ++t) {
    const std::string topic = synthetic_topic_word(t);
    for (int j = 0; j < 4; ++j) {
      DocumentInput d;
      d.id = "t" + std::to_string(t) + "-d" + std::to_string(j);
      std::string text = "Report on " + topic + ", part " + std::to_string(j) + ".";
      for (int w = 0; w < 48; ++w) {
        text += ' ';
        text += (w % 3 == 0) ? topic : kSyntheticFillerWords[rng() % std::size(kSyntheticFillerWords)];
      }
      d.text = text + ".";
      docs.push_back(d);
    }
  }
  return docs;
}

struct Req {
  std::string pipeline, query, tenant = "default";
  int max_tokens = 8;
  double arrival_s = 0;  // open loop
  int cls = 0;           // 0 short / 1 long
};

struct Result1 {
  double ttft_ms = -1, e2e_ms = 0, tpot_ms = 0;
  std::vector<double> itl_ms;
  int tokens = 0, prompt = 0, reused = 0;
  bool ok = false;
  int cls = 0;
};

// Submits one request and blocks until it is done (client side timing).
Result1 run_one(Executor& ex, const Req& q) {
  RunRequest rr;
  rr.pipeline = q.pipeline;
  rr.query = q.query;
  rr.tenant = q.tenant;
  rr.sampling.max_tokens = q.max_tokens;
  rr.sampling.ignore_eos = true;
  const bench::Observed o = bench::run_and_wait(ex, std::move(rr));
  Result1 r;
  r.cls = q.cls;
  r.ok = o.ok;
  r.ttft_ms = o.ttft_ms;
  r.e2e_ms = o.e2e_ms;
  r.itl_ms = o.itl_ms;
  r.tokens = o.tokens;
  r.prompt = o.usage.prompt_tokens;
  r.reused = o.usage.reused_tokens();
  if (r.tokens > 1) r.tpot_ms = (r.e2e_ms - r.ttft_ms) / (r.tokens - 1);
  return r;
}

std::vector<Result1> closed_loop(Executor& ex, const std::vector<Req>& reqs, int clients, double* wall_s) {
  return bench::closed_loop<Result1>(reqs, clients, [&](const Req& q) { return run_one(ex, q); }, wall_s);
}

std::vector<Result1> open_loop(Executor& ex, const std::vector<Req>& reqs, double* wall_s) {
  return bench::open_loop<Result1>(reqs, [&](const Req& q) { return run_one(ex, q); }, wall_s);
}

struct Summary {
  double ttft_p50, ttft_p90, ttft_p99, e2e_p50, e2e_p99, tpot_p50, itl_p99, rps, tps, reuse_frac;
  int failed;
};

Summary summarize(const std::vector<Result1>& rs, double wall_s, int cls = -1) {
  std::vector<double> ttft, e2e, tpot, itl;
  long toks = 0, prompt = 0, reused = 0;
  int failed = 0, n = 0;
  for (const auto& r : rs) {
    if (cls >= 0 && r.cls != cls) continue;
    ++n;
    if (!r.ok) {
      ++failed;
      continue;
    }
    ttft.push_back(r.ttft_ms);
    e2e.push_back(r.e2e_ms);
    if (r.tokens > 1) tpot.push_back(r.tpot_ms);
    itl.insert(itl.end(), r.itl_ms.begin(), r.itl_ms.end());
    toks += r.tokens;
    prompt += r.prompt;
    reused += r.reused;
  }
  return {bench::percentile(ttft, 50), bench::percentile(ttft, 90), bench::percentile(ttft, 99), bench::percentile(e2e, 50), bench::percentile(e2e, 99), bench::percentile(tpot, 50), bench::percentile(itl, 99),
          n / wall_s, toks / wall_s, prompt ? double(reused) / prompt : 0.0, failed};
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::string out_dir = (fs::temp_directory_path() / "ragd_bench_e2e").string();
  std::string json_path, device = "cpu";
  int n_req = 40, topics = 12, clients = 1, n_sched = 40, threads = 1;
  double zipf = 0.9;
  ragd::bench::BenchArgs args("bench_e2e");
  args.opt("out", &out_dir).opt("requests", &n_req).opt("topics", &topics).opt("zipf", &zipf);
  args.opt("clients", &clients).opt("sched-requests", &n_sched).opt("json", &json_path).opt("threads", &threads);
  args.opt("device", &device);
  if (!args.parse(argc, argv)) return 2;
  fs::remove_all(out_dir);
  fs::create_directories(out_dir);
  const std::string model = out_dir + "/model", pipes = out_dir + "/pipelines", data = out_dir + "/data";
  if (!bench::make_random_model_dir(model, 128, 4)) {  // 4 heads (2 KV) of 32, vocab 512
    std::fprintf(stderr, "cannot write the model\n");
    return 1;
  }
  fs::create_directories(pipes);
  for (const char* m : {"none", "prefix", "knowledge_tree"})
    write_file(fs::path(pipes) / (std::string(m) + ".toml"),
               std::string("[pipeline]\nname = \"") + m + "\"\n[retriever]\ntop_k = 4\n[reuse]\nmode = \"" + m + "\"\n");
  std::mt19937 rng(7);
  RuntimeOptions base;
  base.model_dir = model;
  base.model.device = device;
  base.data_dir = data;
  base.pipelines_dir = pipes;
  base.model.kv_pool_bytes = 64ull << 20;
  base.scheduler.max_batch_tokens = 512;
  base.scheduler.max_running = 8;
  base.retrieval_threads = 1;
  base.model.num_threads = threads;
  base.chunk_tokens = 1024;
  base.embedder_dim = 4096;  // few hash collisions: question words do not change the retrieved set  // one chunk per document: a topic's top-4 is exactly its 4 documents  // engine compute threads; 1 keeps a shared box from oversubscribing
  {
    auto rt = open_runtime(base);
    if (!rt.ok()) {
      std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
      return 1;
    }
    auto s = rt->documents->ingest(synthetic_corpus(topics, rng));
    if (!s.ok()) {
      std::fprintf(stderr, "ingest: %s\n", s.status().to_string().c_str());
      return 1;
    }
    rt->stop();
  }

  // ---- reuse modes on the Zipf workload ----------------------------------------------------
  std::vector<double> w(topics);
  for (int t = 0; t < topics; ++t) w[t] = 1.0 / std::pow(t + 1, zipf);
  std::discrete_distribution<int> pick(w.begin(), w.end());
  std::vector<Req> reqs;
  for (int i = 0; i < n_req; ++i) {
    Req q;
    const int t = pick(rng);
    q.query = std::string(kSyntheticAskWords[rng() % std::size(kSyntheticAskWords)]) + " " + synthetic_topic_word(t) + " " +
              kSyntheticAskWords[rng() % std::size(kSyntheticAskWords)] + "?";
    q.max_tokens = 8;
    reqs.push_back(q);
  }
  std::string json = "{\"reuse\":{";
  std::printf("## KV reuse, Zipf(%.2f) over %d topics x 4 documents, top-4, %d requests, %d clients\n\n", zipf,
              topics, n_req, clients);
  std::printf("| reuse | TTFT p50 ms | TTFT p99 ms | e2e p50 ms | req/s | prompt tokens reused |\n|---|---|---|---|---|---|\n");
  std::map<std::string, Summary> by_mode;
  double mean_prompt = 0;
  for (const char* m : {"none", "prefix", "knowledge_tree"}) {
    fs::remove_all(fs::path(data) / "kvcache");
    auto rt = open_runtime(base);
    if (!rt.ok()) return 1;
    for (auto& q : reqs) q.pipeline = m;
    double wall = 0;
    auto rs = closed_loop(*rt->executor, reqs, clients, &wall);
    const Summary s = summarize(rs, wall);
    by_mode[m] = s;
    if (getenv("RAGD_BENCH_VERBOSE")) std::fprintf(stderr, "%s stats: %s\n", m, rt->executor->stats_json().c_str());
    if (getenv("RAGD_BENCH_VERBOSE"))
      for (size_t i = 0; i < rs.size(); ++i) std::fprintf(stderr, "  %s -> prompt %d reused %d\n", reqs[i].query.c_str(), rs[i].prompt, rs[i].reused);
    mean_prompt = 0;
    for (const auto& r : rs) mean_prompt += double(r.prompt) / rs.size();
    std::printf("| %s | %.1f | %.1f | %.1f | %.2f | %.0f%% |\n", m, s.ttft_p50, s.ttft_p99, s.e2e_p50, s.rps,
                100 * s.reuse_frac);
    json += std::string(m == std::string("none") ? "" : ",") + "\"" + m + "\":{\"ttft_p50_ms\":" + std::to_string(s.ttft_p50) +
            ",\"ttft_p99_ms\":" + std::to_string(s.ttft_p99) + ",\"e2e_p50_ms\":" + std::to_string(s.e2e_p50) +
            ",\"rps\":" + std::to_string(s.rps) + ",\"reused_fraction\":" + std::to_string(s.reuse_frac) +
            ",\"failed\":" + std::to_string(s.failed) + "}";
    rt->stop();
  }
  std::printf("\nmean prompt tokens %.0f\n", mean_prompt);
  const auto& none = by_mode["none"];
  std::printf("\nTTFT none / prefix: p50 %.2fx, p99 %.2fx; none / knowledge_tree: p50 %.2fx, p99 %.2fx\n\n",
              none.ttft_p50 / by_mode["prefix"].ttft_p50, none.ttft_p99 / by_mode["prefix"].ttft_p99,
              none.ttft_p50 / by_mode["knowledge_tree"].ttft_p50, none.ttft_p99 / by_mode["knowledge_tree"].ttft_p99);
  json += "},\"sched\":{";
  if (getenv("RAGD_BENCH_SKIP_SCHED")) {
    write_file(json_path.empty() ? "/dev/null" : json_path, json + "}}\n");
    return 0;
  }

  // ---- scheduling policies on a mixed short/long workload -----------------------------------
  std::vector<Req> mix;
  for (int i = 0; i < n_sched; ++i) {
    Req q;
    q.pipeline = "none";
    q.cls = (rng() % 4 == 0) ? 1 : 0;
    q.tenant = q.cls ? "batch" : "interactive";
    q.max_tokens = q.cls ? 96 : 4;
    q.query = std::string(kSyntheticAskWords[rng() % std::size(kSyntheticAskWords)]) + " " + synthetic_topic_word(rng() % topics);
    mix.push_back(q);
  }
  // Capacity estimate: closed loop with max_running clients on the first requests.
  RuntimeOptions so = base;
  so.scheduler.max_running = 4;
  so.scheduler.max_batch_tokens = 256;
  double rate = 1.0;
  {
    auto rt = open_runtime(so);
    if (!rt.ok()) return 1;
    std::vector<Req> cal(mix.begin(), mix.begin() + std::min<size_t>(mix.size(), 16));
    double wall = 0;
    closed_loop(*rt->executor, cal, 4, &wall);
    rate = cal.size() / wall;
    rt->stop();
  }
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (auto& q : mix) {
    t += gap(rng);
    q.arrival_s = t;
  }
  std::printf("## Scheduling, %d requests (75%% short: 4 tokens, 25%% long: 96 tokens), Poisson %.2f req/s, max_running 4\n\n",
              n_sched, rate);
  std::printf("| policy | TTFT p50 ms | TTFT p99 ms | short TTFT p99 ms | long TTFT p99 ms | e2e p99 ms |\n|---|---|---|---|---|---|\n");
  bool first = true;
  for (const char* p : {"fcfs", "sjf", "fair"}) {
    RuntimeOptions o = so;
    o.scheduler.policy = *parse_sched_policy(p);
    auto rt = open_runtime(o);
    if (!rt.ok()) return 1;
    double wall = 0;
    auto rs = open_loop(*rt->executor, mix, &wall);
    const Summary all = summarize(rs, wall), sh = summarize(rs, wall, 0), lg = summarize(rs, wall, 1);
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", p, all.ttft_p50, all.ttft_p99, sh.ttft_p99, lg.ttft_p99,
                all.e2e_p99);
    const std::string stats = rt->executor->stats_json();
    const size_t lp = stats.find("\"length_predictor\"");
    if (std::string(p) == "sjf" && lp != std::string::npos)
      std::printf("\nsjf length predictor: %s\n\n", stats.substr(lp, stats.find('}', lp) - lp + 1).c_str());
    json += std::string(first ? "" : ",") + "\"" + p + "\":{\"ttft_p50_ms\":" + std::to_string(all.ttft_p50) +
            ",\"ttft_p99_ms\":" + std::to_string(all.ttft_p99) + ",\"short_ttft_p99_ms\":" + std::to_string(sh.ttft_p99) +
            ",\"long_ttft_p99_ms\":" + std::to_string(lg.ttft_p99) + ",\"e2e_p99_ms\":" + std::to_string(all.e2e_p99) + "}";
    first = false;
    rt->stop();
  }
  json += "},\"rate\":" + std::to_string(rate) + "}";
  if (!json_path.empty()) write_file(json_path, json + "\n");
  return 0;
}
