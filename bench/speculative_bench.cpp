// Speculative decoding benchmark (n-gram drafts, ExecutorImpl::verify_draft): the same requests
// with drafts off and on, in one process, taking turns per request so that drift in machine load
// hits both alike; outputs are checked identical (token ids).
//
//   bench_speculative --mode qa --model models/ragd-qa [--questions N] [--k 8] [--max-tokens 48]
//       RAG answers of the trained QA model over examples/qa_eval (the built-in "default"
//       pipeline, greedy, one request at a time): decode tok/s (tokens after the first over the
//       time after the first token), TTFT, acceptance rate, accepted tokens per verification step,
//       answer lengths.
//   bench_speculative --mode batch --model DIR [--batches 1,4,16,64] [--k 8] [--max-tokens 64]
//       Throughput (generated tokens / wall time) of B plain runs submitted at once, greedy with
//       ignore_eos on a copy-heavy prompt: off, on with the default turn-down
//       (speculative_max_decodes 4) and on with drafts forced at every batch size (max_decodes
//       256), to measure where verification stops paying.
//   Common: [--threads N] [--source-dir DIR] (examples/ is read from it; default: the build's).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>
#include <algorithm>

#include <unistd.h>

#include <simdjson.h>

#include "ragd/pipelines/runtime.h"
#include "bench_args.h"
#include "qa_corpus.h"
#include "run_client.h"

namespace fs = std::filesystem;
using namespace ragd;
using namespace ragd::pipelines;
using ragd::bench::Observed;
using ragd::bench::run_and_wait;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string mode = "qa", model, source_dir = RAGD_SOURCE_DIR;
  int questions = 60, k = 8, max_tokens = 48, threads = 2, reps = 5;
  std::vector<int> batches = {1, 4, 16, 64};
};

Args parse(int argc, char** argv) {
  Args a;
  ragd::bench::BenchArgs args("bench_speculative");
  args.opt("mode", &a.mode).opt("model", &a.model).opt("source-dir", &a.source_dir).opt("questions", &a.questions);
  args.opt("k", &a.k).opt("max-tokens", &a.max_tokens).opt("threads", &a.threads).opt("reps", &a.reps);
  args.list("batches", &a.batches);
  if (!args.parse(argc, argv)) std::exit(2);
  if (a.model.empty()) {
    std::fprintf(stderr, "--model DIR is required\n");
    std::exit(2);
  }
  return a;
}

std::vector<std::pair<std::string, std::string>> read_jsonl(const std::string& path, const char* a, const char* b, size_t limit) {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in(path);
  simdjson::dom::parser p;
  for (std::string line; std::getline(in, line) && out.size() < limit;) {
    simdjson::dom::element e;
    if (p.parse(line).get(e)) continue;
    std::string_view x, y;
    if (e[a].get_string().get(x) || e[b].get_string().get(y)) continue;
    out.emplace_back(std::string(x), std::string(y));
  }
  return out;
}

Runtime open(const Args& a, const std::string& data, int spec_k, int max_decodes) {
  RuntimeOptions o;
  o.model_dir = a.model;
  o.data_dir = data;
  o.num_threads = a.threads;
  o.retrieval_threads = 1;
  o.speculative_k = spec_k;
  o.speculative_max_decodes = max_decodes;
  o.max_running = 64;
  o.kv_pool_bytes = 1ull << 30;
  auto rt = open_runtime(o);
  if (!rt.ok()) {
    std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(rt).value();
}

int qa(const Args& a) {
  const std::string data = (fs::temp_directory_path() / ("ragd_specbench_" + std::to_string(::getpid()))).string();
  fs::remove_all(data);
  Runtime rt = open(a, data, 0, 4);
  const std::vector<DocumentInput> docs = ragd::bench::read_qa_corpus(a.source_dir);
  auto ing = rt.documents->ingest(docs);
  if (!ing.ok()) {
    std::fprintf(stderr, "ingest: %s\n", ing.status().to_string().c_str());
    return 1;
  }
  const auto qs = read_jsonl(a.source_dir + "/examples/qa_eval/questions.jsonl", "question", "answer", static_cast<size_t>(a.questions));
  struct Sum {
    double decode_ms = 0, ttft_ms = 0;
    long after_first = 0, tokens = 0, drafted = 0, accepted = 0, steps = 0;
  } sum[2];
  int identical = 0;
  std::vector<int> lengths;
  for (size_t i = 0; i < qs.size(); ++i) {
    std::vector<int32_t> ids[2];
    for (int t = 0; t < 2; ++t) {
      const int spec = (static_cast<int>(i) + t) % 2;  // alternate which goes first
      RunRequest r;
      r.pipeline = "default";
      r.query = qs[i].first;
      r.overrides.max_tokens = a.max_tokens;
      r.overrides.temperature = 0.0f;
      r.reuse = ReuseMode::kNone;
      r.speculative_k = spec ? a.k : 0;
      r.id = "q" + std::to_string(i) + "-" + std::to_string(spec);
      const Observed o = run_and_wait(*rt.executor, r);
      if (!o.ok) return 1;
      Sum& s = sum[spec];
      s.ttft_ms += o.ttft_ms;
      s.decode_ms += o.e2e_ms - o.ttft_ms;
      s.after_first += std::max(0, o.tokens - 1);
      s.tokens += o.tokens;
      s.drafted += o.usage.drafted_tokens;
      s.accepted += o.usage.accepted_tokens;
      s.steps += o.usage.draft_steps;
      ids[spec] = o.token_ids;
      if (spec) lengths.push_back(o.tokens);
    }
    identical += ids[0] == ids[1];
  }
  std::sort(lengths.begin(), lengths.end());
  double mean_len = 0;
  for (int l : lengths) mean_len += l;
  mean_len /= std::max<size_t>(1, lengths.size());
  std::printf("# qa: %zu questions, model %s, k %d, max_tokens %d, %d threads; identical outputs %d/%zu\n", qs.size(),
              a.model.c_str(), a.k, a.max_tokens, a.threads, identical, qs.size());
  std::printf("# answer tokens: mean %.1f, median %d, max %d\n", mean_len, lengths.empty() ? 0 : lengths[lengths.size() / 2],
              lengths.empty() ? 0 : lengths.back());
  std::printf("%-6s %12s %10s %10s %10s %12s\n", "drafts", "decode tok/s", "TTFT ms", "drafted", "accepted", "accepted/step");
  for (int spec = 0; spec < 2; ++spec) {
    const Sum& s = sum[spec];
    std::printf("%-6s %12.1f %10.1f %10ld %10ld %12.2f\n", spec ? "ngram" : "off", 1000.0 * s.after_first / std::max(1e-9, s.decode_ms),
                s.ttft_ms / std::max<size_t>(1, qs.size()), s.drafted, s.accepted, s.steps ? double(s.accepted) / s.steps : 0.0);
  }
  std::printf("speedup (decode tok/s, ngram / off): %.2fx; acceptance %.1f %%\n",
              (sum[1].after_first / std::max(1e-9, sum[1].decode_ms)) / std::max(1e-12, sum[0].after_first / std::max(1e-9, sum[0].decode_ms)),
              100.0 * sum[1].accepted / std::max(1L, sum[1].drafted));
  rt.stop();  // closed before its directory goes
  rt.executor.reset();
  rt.documents.reset();
  fs::remove_all(data);
  return identical == static_cast<int>(qs.size()) ? 0 : 3;
}

int batch(const Args& a) {
  std::printf("# batch: model %s, k %d, max_tokens %d, %d threads; throughput = generated tokens / wall time, median of %d "
              "rounds (the modes take turns within a round)\n", a.model.c_str(), a.k, a.max_tokens, a.threads, a.reps);
  std::printf("%-6s %-22s %12s %9s %10s %10s\n", "batch", "drafts", "tok/s", "vs off", "accepted", "identical");
  const std::string passage = "The archive at Norwell lists the survey of 1874, the survey of 1902 and the survey of 1931; each survey "
                              "names the river, the mill and the bridge.";
  const struct { const char* name; int k, max_decodes; } modes[] = {{"off", 0, 4}, {"ngram (turn-down 4)", a.k, 4}, {"ngram (forced)", a.k, 256}};
  for (int b : a.batches) {
    std::vector<double> tps[3];
    long accepted[3] = {0, 0, 0};
    bool same[3] = {true, true, true};
    std::vector<std::vector<int32_t>> ref;
    for (int rep = 0; rep < a.reps; ++rep)
      for (int mi = 0; mi < 3; ++mi) {
        const auto& m = modes[mi];
        const std::string data = (fs::temp_directory_path() / ("ragd_specbatch_" + std::to_string(::getpid()))).string();
        fs::remove_all(data);
        Runtime rt = open(a, data, m.k, m.max_decodes);
        std::vector<Observed> outs(static_cast<size_t>(b));
        std::vector<std::thread> th;
        const auto t0 = Clock::now();
        for (int i = 0; i < b; ++i)
          th.emplace_back([&, i] {
            RunRequest r;
            r.prompt = passage + "\n" + passage + "\nAgain, item " + std::to_string(i) + ": " + passage.substr(0, 40);
            r.sampling.max_tokens = a.max_tokens;
            r.sampling.ignore_eos = true;
            r.sampling.temperature = 0.0f;
            r.reuse = ReuseMode::kNone;
            outs[static_cast<size_t>(i)] = run_and_wait(*rt.executor, r);
          });
        for (auto& t : th) t.join();
        const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
        long tokens = 0, acc = 0;
        std::vector<std::vector<int32_t>> ids;
        for (const auto& o : outs) tokens += o.tokens, acc += o.usage.accepted_tokens, ids.push_back(o.token_ids);
        tps[mi].push_back(tokens / wall);
        accepted[mi] = acc;
        if (mi == 0 && rep == 0) ref = ids;
        same[mi] = same[mi] && ids == ref;
        rt.stop();
        rt.executor.reset();
        rt.documents.reset();
        fs::remove_all(data);
      }
    auto median = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    for (int mi = 0; mi < 3; ++mi)
      std::printf("%-6d %-22s %12.1f %8.2fx %10ld %10s\n", b, modes[mi].name, median(tps[mi]), median(tps[mi]) / median(tps[0]),
                  accepted[mi], same[mi] ? "yes" : "NO");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  if (a.mode == "qa") return qa(a);
  if (a.mode == "batch") return batch(a);
  std::fprintf(stderr, "--mode must be qa or batch\n");
  return 2;
}
