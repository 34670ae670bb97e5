// Iterative RAG benchmark: retrieval every --interval generated tokens during a --max-tokens answer,
// over an IVF index of --chunks passages, for each overlap mode (none / piperag / speculative /
// both), in one process, on the same requests. Reported per mode: end-to-end latency (mean, p50),
// the search time decoding waited for (non-overlapped), searches, context changes, speculation
// accuracy and rolled-back tokens, and the speedup over `none` measured in the same run. With
// --delays, every search also waits that long first: a model of a remote vector database (one
// round trip per search call; a batched verification is one call; the stages of a progressive
// search share one round trip). Then one-shot RAG (8 tokens) with and without speculative prefill
// (RAGCache's speculative pipelining): TTFT and the search time prefill could not overlap.
//
//   bench_iterative [--out DIR] [--model DIR] [--chunks N] [--index SPEC] [--nprobe P]
//                   [--requests N] [--max-tokens T] [--interval I] [--window M] [--top-k K] [--delays "0,20"]
//                   [--dim D] [--threads N] [--json FILE]
//
// The corpus (synthetic passages: a topic word and shared filler words, one chunk each) is built
// once under DIR/data and reused while --chunks, --index and --dim (hashing embedder) stay the
// same. Requests run one at a time (latency, not throughput); the modes take turns per request so
// that drift in machine load hits them alike, and no prompt KV is cached (reuse "none"), so no
// mode profits from an earlier mode's prefill of the same question. Greedy outputs of speculative and both are checked against none's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ragd/engine/tokenizer.h"
#include "ragd/pipelines/runtime.h"
#include "ragd/retrieval/corpus.h"
#include "../tools/ragctl/synthetic_words.h"
#include "bench_args.h"
#include "bench_files.h"
#include "run_client.h"

namespace fs = std::filesystem;
using namespace ragd;
using namespace ragd::pipelines;
using ragd::bench::read_file_or_empty;
using ragd::bench::write_file;
using ragd::tools::kSyntheticAskWords;
using ragd::tools::kSyntheticFillerWords;
using ragd::tools::synthetic_topic_word;

namespace {

// Passages: topic t of n_topics, a few sentences of filler with the topic word every third word.
std::vector<retrieval::Document> passages(int first, int n, int n_topics, std::mt19937& rng) {
  std::vector<retrieval::Document> docs;
  for (int i = first; i < first + n; ++i) {
    const int t = i % n_topics;
    const std::string topic = synthetic_topic_word(t);
    retrieval::Document d;
    d.id = "p" + std::to_string(i);
    std::string text = "Notes on " + topic + ", item " + std::to_string(i) + ".";
    for (int w = 0; w < 24; ++w) {
      text += ' ';
      text += (w % 3 == 0) ? topic : kSyntheticFillerWords[rng() % std::size(kSyntheticFillerWords)];
    }
    d.text = text + ".";
    docs.push_back(std::move(d));
  }
  return docs;
}

bool build_corpus(const std::string& data, const std::string& model, int chunks, const std::string& index, int dim) {
  const std::string stamp = std::to_string(chunks) + " " + index + " " + std::to_string(dim);
  if (fs::exists(fs::path(data) / "bench.stamp") && read_file_or_empty(fs::path(data) / "bench.stamp") == stamp) {
    std::printf("corpus: reusing %s (%d passages, %s)\n", data.c_str(), chunks, index.c_str());
    return true;
  }
  fs::remove_all(data);
  auto tok = engine::Tokenizer::from_file((fs::path(model) / "tokenizer.json").string());
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer: %s\n", tok.status().to_string().c_str());
    return false;
  }
  retrieval::CorpusOptions co;
  co.index_spec = index;
  co.embedder.dim = dim;
  co.chunker.chunk_tokens = 256;  // one chunk per passage
  co.index_save_every_chunks = static_cast<uint64_t>(chunks) + 1;
  auto c = retrieval::Corpus::open(data, co, std::shared_ptr<const engine::Tokenizer>(std::move(tok).value()));
  if (!c.ok()) {
    std::fprintf(stderr, "corpus: %s\n", c.status().to_string().c_str());
    return false;
  }
  std::mt19937 rng(11);
  const int n_topics = std::max(1, chunks / 8);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < chunks; i += 5000) {
    auto docs = passages(i, std::min(5000, chunks - i), n_topics, rng);
    auto s = (*c)->ingest(docs);
    if (!s.ok()) {
      std::fprintf(stderr, "ingest: %s\n", s.status().to_string().c_str());
      return false;
    }
  }
  if (Status st = (*c)->save_index(); !st.ok()) {
    std::fprintf(stderr, "save index: %s\n", st.to_string().c_str());
    return false;
  }
  const auto st = (*c)->stats();
  std::printf("corpus: %llu passages, index %s (trained %d), built in %.1f s\n",
              static_cast<unsigned long long>(st.chunks), st.index_spec.c_str(), st.index_trained ? 1 : 0,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  c->reset();
  write_file(fs::path(data) / "bench.stamp", stamp);
  return true;
}

struct ModeStats {
  std::vector<double> e2e, wait, ttft;
  long searches = 0, changes = 0, hits = 0, misses = 0, rolled = 0, tokens = 0;
  int same_as_none = 0, compared = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string out = "/tmp/ragd-iterative-bench", model = "models/ragd-qa", index = "IVF1024,Flat", json_path;
  std::vector<double> delays{0, 20};
  int chunks = 100000, nprobe = 16, requests = 8, max_tokens = 128, interval = 16, top_k = 4, threads = 0, dim = 4096, window = 64;
  ragd::bench::BenchArgs args("bench_iterative");
  args.opt("out", &out).opt("model", &model).opt("chunks", &chunks).opt("index", &index).opt("nprobe", &nprobe);
  args.opt("requests", &requests).opt("max-tokens", &max_tokens).opt("interval", &interval).opt("top-k", &top_k);
  args.list("delays", &delays).opt("threads", &threads).opt("dim", &dim).opt("window", &window);
  args.opt("json", &json_path);
  if (!args.parse(argc, argv)) return 2;
  fs::create_directories(out);
  const std::string data = out + "/data", pipes = out + "/pipelines";
  if (!build_corpus(data, model, chunks, index, dim)) return 1;
  fs::create_directories(pipes);
  write_file(fs::path(pipes) / "iter.toml",
             "[pipeline]\nname = \"iter\"\n[retriever]\ntop_k = " + std::to_string(top_k) +
                 "\nnprobe = " + std::to_string(nprobe) + "\n[reuse]\nmode = \"none\"\n[iterative]\n" +
                 "retrieval_interval = " + std::to_string(interval) + "\nquery_window = " + std::to_string(window) +
                 "\n[generation]\nmax_tokens = " + std::to_string(max_tokens) + "\n");

  write_file(fs::path(pipes) / "oneshot.toml",
             "[pipeline]\nname = \"oneshot\"\n[retriever]\ntop_k = " + std::to_string(top_k) +
                 "\nnprobe = " + std::to_string(nprobe) + "\n[reuse]\nmode = \"none\"\n[generation]\nmax_tokens = 8\n");
  const int n_topics = std::max(1, chunks / 8);
  std::mt19937 rng(5);
  std::vector<std::string> queries;
  for (int i = 0; i < requests + 1; ++i)
    queries.push_back(std::string(kSyntheticAskWords[rng() % std::size(kSyntheticAskWords)]) + " " +
                      synthetic_topic_word(rng() % n_topics));
  const RetrievalOverlap modes[] = {RetrievalOverlap::kNone, RetrievalOverlap::kPipeRag, RetrievalOverlap::kSpeculative,
                                    RetrievalOverlap::kBoth};
  std::string json = "{\"chunks\":" + std::to_string(chunks) + ",\"index\":\"" + index + "\",\"interval\":" +
                     std::to_string(interval) + ",\"max_tokens\":" + std::to_string(max_tokens) + ",\"runs\":[";
  bool first_json = true;
  for (double delay : delays) {
    RuntimeOptions o;
    o.model_dir = model;
    o.data_dir = data;
    o.pipelines_dir = pipes;
    o.model.num_threads = threads;
    o.retrieval_threads = 2;
    o.test_hooks.search_delay_ms = delay;
    o.kv.ssd_bytes = 0;
    auto rt = open_runtime(o);
    if (!rt.ok()) {
      std::fprintf(stderr, "open_runtime: %s\n", rt.status().to_string().c_str());
      return 1;
    }
    std::map<RetrievalOverlap, ModeStats> st;
    for (int i = 0; i < requests + 1; ++i) {  // request 0 warms up
      std::vector<int32_t> none_tokens;
      for (RetrievalOverlap m : modes) {
        RunRequest rr;
        rr.pipeline = "iter";
        rr.query = queries[i];
        rr.overlap = m;
        rr.sampling.ignore_eos = true;
        const bench::Observed ob = bench::run_and_wait(*rt->executor, std::move(rr));
        if (!ob.ok) return 1;
        if (i == 0) continue;
        ModeStats& s = st[m];
        s.e2e.push_back(ob.e2e_ms);
        s.ttft.push_back(ob.ttft_ms);
        s.wait.push_back(ob.timings.search_wait_ms);
        s.searches += ob.usage.searches;
        s.changes += ob.usage.context_changes;
        s.hits += ob.usage.speculative_hits;
        s.misses += ob.usage.speculative_misses;
        s.rolled += ob.usage.rolled_back_tokens;
        s.tokens += ob.tokens;
        if (m == RetrievalOverlap::kNone) none_tokens = ob.token_ids;
        else if (is_speculative(m)) {
          ++s.compared;
          s.same_as_none += ob.token_ids == none_tokens;
        }
      }
    }
    auto mean = [](const std::vector<double>& v) {
      double t = 0;
      for (double x : v) t += x;
      return v.empty() ? 0.0 : t / v.size();
    };
    // One-shot RAG with and without speculative prefill (progressive search: nprobe/4, /2, all).
    struct OneShot {
      std::vector<double> ttft, wait, retrieval;
      long restarts = 0, speculated = 0, same = 0;
    } os[2];
    for (int i = 0; i < 2 * requests + 1; ++i) {
      std::vector<int32_t> plain_tokens;
      for (int spec = 0; spec < 2; ++spec) {
        RunRequest rr;
        rr.pipeline = "oneshot";
        rr.query = queries[i % queries.size()] + (i >= static_cast<int>(queries.size()) ? " again" : "");
        rr.speculative_prefill = spec == 1;
        rr.sampling.ignore_eos = true;
        const bench::Observed ob = bench::run_and_wait(*rt->executor, std::move(rr));
        if (!ob.ok) return 1;
        if (i == 0) continue;
        os[spec].ttft.push_back(ob.ttft_ms);
        os[spec].wait.push_back(ob.timings.search_wait_ms);
        os[spec].retrieval.push_back(ob.timings.retrieval_ms);
        os[spec].restarts += ob.usage.prefill_restarts;
        os[spec].speculated += ob.usage.speculative_prefill;
        if (spec == 0) plain_tokens = ob.token_ids;
        else os[1].same += ob.token_ids == plain_tokens;
      }
    }
    rt->stop();
    const double none_e2e = mean(st[RetrievalOverlap::kNone].e2e);
    std::printf("\nsearch delay %.0f ms (%s), %d requests x %d tokens, retrieval every %d tokens, query window %d, "
                "top-%d, nprobe %d\n",
                delay, delay > 0 ? "models a remote vector database" : "in-process index", requests, max_tokens,
                interval, window, top_k, nprobe);
    std::printf("%-12s %10s %10s %9s %12s %9s %8s %10s %9s %10s %8s\n", "overlap", "e2e mean", "e2e p50", "TTFT",
                "search wait", "searches", "changes", "spec acc", "rollback", "= none", "speedup");
    for (RetrievalOverlap m : modes) {
      const ModeStats& s = st[m];
      const double acc = s.hits + s.misses ? static_cast<double>(s.hits) / (s.hits + s.misses) : 0;
      char same[32] = "-";
      if (s.compared) std::snprintf(same, sizeof same, "%d/%d", s.same_as_none, s.compared);
      char accs[32] = "-";
      if (is_speculative(m)) std::snprintf(accs, sizeof accs, "%.2f", acc);
      std::printf("%-12s %8.1fms %8.1fms %7.1fms %10.1fms %9.1f %8.1f %10s %9.1f %10s %7.2fx\n",
                  std::string(overlap_name(m)).c_str(), mean(s.e2e), bench::percentile(s.e2e, 50), mean(s.ttft),
                  mean(s.wait), static_cast<double>(s.searches) / requests, static_cast<double>(s.changes) / requests,
                  accs, static_cast<double>(s.rolled) / requests, same, none_e2e / std::max(1e-9, mean(s.e2e)));
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "%s{\"delay_ms\":%.1f,\"overlap\":\"%s\",\"e2e_ms\":%.2f,\"e2e_p50_ms\":%.2f,\"ttft_ms\":%.2f,"
                    "\"search_wait_ms\":%.2f,\"searches\":%.2f,\"context_changes\":%.2f,\"spec_accuracy\":%.3f,"
                    "\"rolled_back\":%.2f,\"same_as_none\":%d,\"compared\":%d,\"speedup\":%.3f}",
                    first_json ? "" : ",", delay, std::string(overlap_name(m)).c_str(), mean(s.e2e),
                    bench::percentile(s.e2e, 50), mean(s.ttft), mean(s.wait), static_cast<double>(s.searches) / requests,
                    static_cast<double>(s.changes) / requests, acc, static_cast<double>(s.rolled) / requests,
                    s.same_as_none, s.compared, none_e2e / std::max(1e-9, mean(s.e2e)));
      json += buf;
      first_json = false;
    }
    std::printf("one-shot RAG, %d requests x 8 tokens, top-%d, progressive search nprobe %d/%d/%d\n", 2 * requests,
                top_k, std::max(1, nprobe / 4), std::max(1, nprobe / 2), nprobe);
    std::printf("%-22s %9s %12s %12s %10s %10s %8s\n", "speculative prefill", "TTFT", "search", "search wait",
                "restarts", "= plain", "speedup");
    for (int spec = 0; spec < 2; ++spec) {
      const OneShot& o = os[spec];
      char same[32] = "-";
      if (spec) std::snprintf(same, sizeof same, "%ld/%zu", o.same, o.ttft.size());
      std::printf("%-22s %7.1fms %10.1fms %10.1fms %10.2f %10s %7.2fx\n", spec ? "on" : "off", mean(o.ttft),
                  mean(o.retrieval), mean(o.wait), static_cast<double>(o.restarts) / std::max<size_t>(1, o.ttft.size()),
                  same, mean(os[0].ttft) / std::max(1e-9, mean(o.ttft)));
      char buf[320];
      std::snprintf(buf, sizeof buf,
                    ",{\"delay_ms\":%.1f,\"one_shot\":true,\"speculative_prefill\":%s,\"ttft_ms\":%.2f,"
                    "\"search_wait_ms\":%.2f,\"restarts\":%.3f,\"same_as_plain\":%ld}",
                    delay, spec ? "true" : "false", mean(o.ttft), mean(o.wait),
                    static_cast<double>(o.restarts) / std::max<size_t>(1, o.ttft.size()), spec ? o.same : 0L);
      json += buf;
    }
  }
  json += "]}";
  if (!json_path.empty()) write_file(json_path, json + "\n");
  return 0;
}
