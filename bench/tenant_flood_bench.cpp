// bench_tenant_flood: one tenant floods the daemon with long streaming runs while another sends
// short ones; how long does the small tenant wait for its first token, and what does the flood
// lose to it?
//
// The bench ingests the QA corpus with `ragctl ingest` into a temporary data directory, starts the
// real bin/ragd on a free loopback port with two API keys (key-a = tenant-a, key-b = tenant-b,
// plus an admin key for /v1/cache/stats) and the extra `--set` flags given by --config, and for
// each N of --streams (a fresh daemon each):
//   1. alone: tenant A opens N SSE streaming runs of the pipeline (ignore_eos, max_tokens as long
//      as the model's context allows, up to --max-tokens), each reopened when it ends; after
//      --warmup seconds A's token events are counted for --seconds: A's tokens/s alone;
//   2. the streams are dropped, the daemon drains to idle, and A opens N streams again;
//   3. flood: after --warmup, during --seconds tenant B starts a short streaming run (max_tokens
//      --b-max-tokens) every --b-interval seconds (open loop; --b-mode closed waits for each run's
//      end first); B's TTFT is client side (request sent -> first token event). A's token events
//      during the same window give its tokens/s under B's load. B's runs still without a token
//      when the window ends get up to --tail seconds more (A keeps running); after that they
//      count as censored at their wait so far (the percentiles are then lower bounds).
// Prints one line per phase and, with --json PATH, writes every number.
//
//   bench_tenant_flood [--streams 24,48] [--seconds 40] [--warmup 5] [--tail 60] [--max-tokens 3000]
//                      [--config runtime.scheduler=fair]... [--b-interval 1.0] [--b-max-tokens 4]
//                      [--b-mode open|closed] [--pipeline default] [--model models/ragd-qa]
//                      [--corpus examples/qa_eval/corpus.jsonl] [--questions examples/qa_eval/questions.jsonl]
//                      [--bin DIR] [--work DIR] [--keep] [--json PATH]
// Run it from the repository root (default paths are relative to it).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <sys/socket.h>

#include "bench_args.h"
#include "bench_daemon.h"

using namespace ragd;
using namespace ragd::bench;
using Clock = std::chrono::steady_clock;

namespace {

struct Opts {
  std::vector<int> streams = {24};
  double seconds = 40, warmup = 5, tail = 60;
  int max_tokens = 3000;
  std::vector<std::string> config;  // section.key=value, each passed as --set
  double b_interval = 1.0;
  int b_max_tokens = 4;
  bool b_closed = false;
  std::string pipeline = "default";
  std::string model = "models/ragd-qa";
  std::string corpus = "examples/qa_eval/corpus.jsonl";
  std::string questions = "examples/qa_eval/questions.jsonl";
  std::string bin;
  std::string work;
  bool keep = false;
  std::string json;
};

const std::string kKeyA = "key-a", kKeyB = "key-b", kKeyAdmin = "key-admin";

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }
Clock::duration dur(double s) { return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s)); }

std::vector<std::string> load_questions(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (auto q = json_string(line, "/question")) out.push_back(*q);
  }
  return out;
}

std::string run_body(const std::string& query, int max_tokens, bool stream) {
  return "{\"query\":" + json_quote(query) + ",\"max_tokens\":" + std::to_string(max_tokens) +
         ",\"temperature\":0,\"ignore_eos\":true" + (stream ? ",\"stream\":true" : "") + "}";
}

// Sockets of the streams in flight, so that the driver can end them (shutdown wakes the blocked
// read). A slot is set under mu and cleared before its client is destroyed.
class Sockets {
 public:
  explicit Sockets(size_t n) : fds_(n, -1) {}
  // False once stop_all() ran: the caller must not start a request.
  bool set(size_t i, int fd) {
    std::lock_guard<std::mutex> lk(mu_);
    if (stopped_) return false;
    fds_[i] = fd;
    return true;
  }
  void clear(size_t i) {
    std::lock_guard<std::mutex> lk(mu_);
    fds_[i] = -1;
  }
  void shutdown_one(size_t i) {
    std::lock_guard<std::mutex> lk(mu_);
    if (fds_[i] >= 0) ::shutdown(fds_[i], SHUT_RDWR);
  }
  void stop_all() {
    std::lock_guard<std::mutex> lk(mu_);
    stopped_ = true;
    for (int fd : fds_)
      if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
  }

 private:
  std::mutex mu_;
  std::vector<int> fds_;  // guarded by mu_
  bool stopped_ = false;  // guarded by mu_
};

// Tenant A: N workers, each keeping one streaming run open until stop.
class Flood {
 public:
  Flood(uint16_t port, const Opts& o, const std::vector<std::string>& queries, int n)
      : port_(port), o_(o), queries_(queries), socks_(static_cast<size_t>(n)) {
    for (int i = 0; i < n; ++i) threads_.emplace_back([this, i] { worker(i); });
  }
  ~Flood() { stop(); }
  void stop() {
    stop_ = true;
    socks_.stop_all();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  long tokens() const { return tokens_.load(); }
  long runs_done() const { return done_.load(); }
  long failures() const { return failed_.load(); }
  long refused() const { return refused_.load(); }

 private:
  void worker(int i) {
    const std::string body = run_body(queries_[static_cast<size_t>(i) % queries_.size()], o_.max_tokens, true);
    while (!stop_) {
      daemon::HttpClient c("127.0.0.1", port_, 600000);
      if (!c.connect().ok()) {
        ++failed_;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        continue;
      }
      if (!socks_.set(static_cast<size_t>(i), c.fd())) break;
      daemon::SseParser sse([&](const std::string& ev, const std::string&) {
        if (ev == "token") ++tokens_;
        if (ev == "done") ++done_;
        if (ev == "error") ++failed_;
      });
      auto r = c.request_stream("POST", "/v1/pipelines/" + o_.pipeline + "/runs", body, bearer(kKeyA),
                                [&](std::string_view d) {
                                  sse.feed(d);
                                  return !stop_.load();
                                });
      socks_.clear(static_cast<size_t>(i));
      if (stop_) break;
      if (!r.ok()) {
        ++failed_;
      } else if (r->status == 429 || r->status == 503) {
        ++refused_;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      } else if (r->status != 200) {
        ++failed_;
        std::fprintf(stderr, "bench_tenant_flood: A run answered %d: %s\n", r->status, r->body.substr(0, 200).c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
  }

  uint16_t port_;
  const Opts& o_;
  const std::vector<std::string>& queries_;
  Sockets socks_;
  std::atomic<bool> stop_{false};
  std::atomic<long> tokens_{0}, done_{0}, failed_{0}, refused_{0};
  std::vector<std::thread> threads_;
};

// One of tenant B's short runs.
struct BRun {
  Clock::time_point sent;
  std::atomic<double> ttft_ms{-1};  // client side; -1 until the first token event
  std::atomic<bool> finished{false};
  std::atomic<int> status{0};       // HTTP status, -1 transport failure
  bool censored = false;
  double wait_ms = 0;               // ttft_ms, or the wait so far when censored
};

struct PhaseResult {
  double window_s = 0;
  long a_tokens = 0;
  double a_tps = 0;
  long a_runs_done = 0, a_failed = 0, a_refused = 0;
  // flood phase only
  int b_sent = 0, b_answered = 0, b_censored = 0, b_failed = 0;
  std::vector<double> b_ttft_ms;  // censored ones included at their wait so far
};

bool wait_idle(uint16_t port, int timeout_ms) {
  daemon::HttpClient c("127.0.0.1", port, 5000);
  const auto end = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < end) {
    auto r = c.request("GET", "/v1/cache/stats", "", bearer(kKeyAdmin));
    if (r.ok() && r->status == 200) {
      const auto run = json_number(r->body, "/requests/running"), wait = json_number(r->body, "/requests/waiting"),
                 fl = json_number(r->body, "/requests/in_flight");
      if (run && wait && fl && *run == 0 && *wait == 0 && *fl == 0) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

PhaseResult run_phase(uint16_t port, const Opts& o, const std::vector<std::string>& a_queries,
                      const std::vector<std::string>& b_queries, int n, bool with_b) {
  PhaseResult res;
  auto flood = std::make_unique<Flood>(port, o, a_queries, n);
  std::this_thread::sleep_for(dur(o.warmup));
  const long tok0 = flood->tokens();
  const auto w0 = Clock::now(), w1 = w0 + dur(o.seconds);

  std::vector<std::unique_ptr<BRun>> runs;
  std::vector<std::thread> b_threads;
  std::mutex runs_mu;  // guards runs (push_back) against the censor pass
  Sockets b_socks(4096);
  if (with_b) {
    int j = 0;
    for (auto next = w0; next < w1 && j < 4096; ++j) {
      std::this_thread::sleep_until(next);
      auto run = std::make_unique<BRun>();
      BRun* br = run.get();
      {
        std::lock_guard<std::mutex> lk(runs_mu);
        runs.push_back(std::move(run));
      }
      const std::string body = run_body(b_queries[static_cast<size_t>(j) % b_queries.size()], o.b_max_tokens, true);
      br->sent = Clock::now();
      b_threads.emplace_back([&, br, body, j] {
        daemon::HttpClient c("127.0.0.1", port, 600000);
        if (!c.connect().ok()) {
          br->status = -1;
          br->finished = true;
          return;
        }
        if (!b_socks.set(static_cast<size_t>(j), c.fd())) {
          br->finished = true;
          return;
        }
        daemon::SseParser sse([&](const std::string& ev, const std::string&) {
          if (ev == "token" && br->ttft_ms < 0)
            br->ttft_ms = std::chrono::duration<double, std::milli>(Clock::now() - br->sent).count();
        });
        auto r = c.request_stream("POST", "/v1/pipelines/" + o.pipeline + "/runs", body, bearer(kKeyB),
                                  [&](std::string_view d) {
                                    sse.feed(d);
                                    return true;
                                  });
        b_socks.clear(static_cast<size_t>(j));
        br->status = r.ok() ? r->status : -1;
        br->finished = true;
      });
      if (o.b_closed) {
        while (!br->finished && Clock::now() < w1 + dur(o.tail)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        next = std::max(next + dur(o.b_interval), Clock::now());
      } else {
        next += dur(o.b_interval);
      }
    }
  }
  std::this_thread::sleep_until(w1);
  res.a_tokens = flood->tokens() - tok0;
  res.window_s = secs(Clock::now() - w0);
  res.a_tps = static_cast<double>(res.a_tokens) / res.window_s;

  if (with_b) {
    // B's runs without a first token yet get up to `tail` more seconds, A still flooding.
    const auto tail_end = Clock::now() + dur(o.tail);
    auto pending = [&] {
      for (const auto& r : runs)
        if (r->ttft_ms < 0 && !r->finished) return true;
      return false;
    };
    while (pending() && Clock::now() < tail_end) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = Clock::now();
    for (auto& r : runs) {
      if (r->ttft_ms >= 0) {
        r->wait_ms = r->ttft_ms;
      } else if (!r->finished) {
        r->censored = true;
        r->wait_ms = std::chrono::duration<double, std::milli>(now - r->sent).count();
      }
    }
    b_socks.stop_all();
    for (auto& t : b_threads) t.join();
    for (auto& r : runs) {
      ++res.b_sent;
      if (r->censored) {
        ++res.b_censored;
        res.b_ttft_ms.push_back(r->wait_ms);
      } else if (r->ttft_ms >= 0) {
        ++res.b_answered;
        res.b_ttft_ms.push_back(r->wait_ms);
      } else {
        ++res.b_failed;  // ended without a token: refused (429/503) or failed
        std::fprintf(stderr, "bench_tenant_flood: a B run ended without a token (status %d)\n", r->status.load());
      }
    }
  }
  res.a_runs_done = flood->runs_done();
  res.a_failed = flood->failures();
  res.a_refused = flood->refused();
  flood->stop();
  return res;
}

std::string phase_json(const PhaseResult& r, bool with_b) {
  std::ostringstream j;
  j << "{\"window_s\":" << jnum(r.window_s) << ",\"a_tokens\":" << r.a_tokens << ",\"a_tokens_per_s\":" << jnum(r.a_tps)
    << ",\"a_runs_completed\":" << r.a_runs_done << ",\"a_failed\":" << r.a_failed << ",\"a_refused\":" << r.a_refused;
  if (with_b) {
    j << ",\"b_sent\":" << r.b_sent << ",\"b_answered\":" << r.b_answered << ",\"b_censored\":" << r.b_censored
      << ",\"b_failed\":" << r.b_failed << ",\"b_ttft_ms\":{\"p50\":" << jnum(pct(r.b_ttft_ms, 50))
      << ",\"p99\":" << jnum(pct(r.b_ttft_ms, 99)) << ",\"min\":" << jnum(pct(r.b_ttft_ms, 0))
      << ",\"max\":" << jnum(pct(r.b_ttft_ms, 100)) << ",\"lower_bound\":" << (r.b_censored > 0 ? "true" : "false")
      << "},\"b_ttft_samples_ms\":[";
    for (size_t i = 0; i < r.b_ttft_ms.size(); ++i) j << (i ? "," : "") << jnum(r.b_ttft_ms[i]);
    j << "]";
  }
  j << "}";
  return j.str();
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  std::string b_mode = o.b_closed ? "closed" : "open";
  BenchArgs cli("bench_tenant_flood");
  cli.flag("keep", &o.keep).list("streams", &o.streams).opt("seconds", &o.seconds).opt("warmup", &o.warmup);
  cli.opt("tail", &o.tail).opt("max-tokens", &o.max_tokens).each("config", &o.config).opt("b-interval", &o.b_interval);
  cli.opt("b-max-tokens", &o.b_max_tokens).opt("b-mode", &b_mode).opt("pipeline", &o.pipeline).opt("model", &o.model);
  cli.opt("corpus", &o.corpus).opt("questions", &o.questions).opt("bin", &o.bin).opt("work", &o.work);
  cli.opt("json", &o.json);
  if (!cli.parse(argc, argv)) return 2;
  o.b_closed = b_mode == "closed";
  if (o.streams.empty() || o.seconds <= 0 || o.max_tokens <= 0 || o.b_interval <= 0 || o.b_max_tokens <= 0) {
    std::fprintf(stderr, "bench_tenant_flood: bad options\n");
    return 2;
  }
  if (o.bin.empty()) o.bin = exe_dir();
  const std::string commit = git_commit();
  const std::vector<std::string> questions = load_questions(o.questions);
  if (questions.size() < 16) {
    std::fprintf(stderr, "bench_tenant_flood: %s: too few questions\n", o.questions.c_str());
    return 2;
  }
  // A asks the first questions, B the last ones: different prompts, no shared KV between them.
  std::vector<std::string> a_queries(questions.begin(), questions.begin() + static_cast<long>(questions.size() / 2));
  std::vector<std::string> b_queries(questions.begin() + static_cast<long>(questions.size() / 2), questions.end());

  bool own_work = o.work.empty();
  if (own_work) {
    char tmpl[] = "/tmp/ragd_tenant_flood_XXXXXX";
    if (!mkdtemp(tmpl)) return 1;
    o.work = tmpl;
  }
  fs::create_directories(o.work);
  const std::string data = o.work + "/data";
  std::printf("bench_tenant_flood: commit %s, model %s, work dir %s\n", commit.c_str(), o.model.c_str(), o.work.c_str());
  if (run_program({o.bin + "/ragctl", "ingest", o.corpus, "--data", data, "--model", o.model}, o.work + "/ingest.log") != 0) {
    std::fprintf(stderr, "bench_tenant_flood: ragctl ingest failed (log %s/ingest.log)\n", o.work.c_str());
    return 1;
  }
  const int ctx = model_context(o.model);
  std::string cfg_text;
  for (const auto& c : o.config) cfg_text += (cfg_text.empty() ? "" : " ") + c;
  std::ostringstream out;
  out << "{\"bench\":\"tenant_flood\",\"commit\":" << json_quote(commit) << ",\"config\":" << json_quote(cfg_text)
      << ",\"pipeline\":" << json_quote(o.pipeline) << ",\"seconds\":" << o.seconds << ",\"warmup\":" << o.warmup
      << ",\"tail\":" << o.tail << ",\"b_interval\":" << o.b_interval << ",\"b_max_tokens\":" << o.b_max_tokens
      << ",\"b_mode\":\"" << (o.b_closed ? "closed" : "open") << "\",\"model_context\":" << ctx << ",\"results\":[";
  int rc = 0;
  for (size_t si = 0; si < o.streams.size(); ++si) {
    const int n = o.streams[si];
    fs::remove_all(data + "/kvcache");  // every N starts from a cold KV cache
    std::vector<std::string> args = {o.bin + "/ragd", "--model", o.model, "--data", data, "--listen", "127.0.0.1:0",
                                     "--api-key", kKeyA + "=tenant-a", "--api-key", kKeyB + "=tenant-b",
                                     "--admin-key", kKeyAdmin + "=ops"};
    for (const auto& c : o.config) {
      args.push_back("--set");
      args.push_back(c);
    }
    RagdProcess d;
    std::string err;
    const std::string log = o.work + "/ragd-" + std::to_string(n) + ".log";
    if (!d.start_ready(args, &err, log, kDaemonStartMs)) {
      std::fprintf(stderr, "bench_tenant_flood: %s\n", err.c_str());
      return 1;
    }
    // Every A prompt once with one token: its length (the run's max_tokens is cut to the context
    // left after it) and its document KV in the cache before either phase.
    int longest_prompt = 0;
    {
      daemon::HttpClient c("127.0.0.1", d.port(), 120000);
      for (int i = 0; i < n; ++i) {
        auto r = c.request("POST", "/v1/pipelines/" + o.pipeline + "/runs",
                           run_body(a_queries[static_cast<size_t>(i) % a_queries.size()], 1, false), bearer(kKeyA));
        if (!r.ok() || r->status != 200) {
          std::fprintf(stderr, "bench_tenant_flood: probe run failed: %s\n",
                       r.ok() ? r->body.substr(0, 300).c_str() : r.status().to_string().c_str());
          return 1;
        }
        longest_prompt = std::max(longest_prompt, static_cast<int>(json_number(r->body, "/usage/prompt_tokens").value_or(0)));
      }
    }
    const int eff = ctx > 0 ? std::min(o.max_tokens, ctx - longest_prompt) : o.max_tokens;
    std::printf("N=%d streams, config [%s]: longest A prompt %d tokens, context %d: each A run generates up to %d tokens\n",
                n, cfg_text.c_str(), longest_prompt, ctx, eff);
    std::fflush(stdout);
    const PhaseResult alone = run_phase(d.port(), o, a_queries, b_queries, n, false);
    std::printf("  alone : A %ld tokens in %.1f s = %.1f tok/s (%ld runs completed, %ld failed)\n", alone.a_tokens,
                alone.window_s, alone.a_tps, alone.a_runs_done, alone.a_failed);
    std::fflush(stdout);
    if (!wait_idle(d.port(), 60000)) std::fprintf(stderr, "bench_tenant_flood: daemon not idle 60 s after the alone phase\n");
    const PhaseResult flood = run_phase(d.port(), o, a_queries, b_queries, n, true);
    const bool lb = flood.b_censored > 0;
    std::printf("  flood : A %ld tokens in %.1f s = %.1f tok/s (%.0f %% of alone)\n", flood.a_tokens, flood.window_s,
                flood.a_tps, alone.a_tps > 0 ? 100 * flood.a_tps / alone.a_tps : 0.0);
    std::printf("          B %d runs sent, %d got a first token, %d censored (no token %.0f s after the window), %d failed\n",
                flood.b_sent, flood.b_answered, flood.b_censored, o.tail, flood.b_failed);
    std::printf("          B TTFT p50 %s%.0f ms, p99 %s%.0f ms (min %.0f, max %.0f)\n", lb ? ">= " : "",
                pct(flood.b_ttft_ms, 50), lb ? ">= " : "", pct(flood.b_ttft_ms, 99), pct(flood.b_ttft_ms, 0),
                pct(flood.b_ttft_ms, 100));
    std::fflush(stdout);
    if (flood.a_failed + alone.a_failed + flood.b_failed > 0) rc = 1;
    out << (si ? "," : "") << "{\"streams\":" << n << ",\"longest_a_prompt\":" << longest_prompt
        << ",\"a_max_tokens\":" << eff << ",\"alone\":" << phase_json(alone, false)
        << ",\"flood\":" << phase_json(flood, true) << ",\"a_tps_ratio\":"
        << jnum(alone.a_tps > 0 ? flood.a_tps / alone.a_tps : std::nan("")) << "}";
    wait_idle(d.port(), 30000);
    d.stop();
  }
  out << "]}";
  if (!o.json.empty()) {
    std::ofstream(o.json) << out.str() << "\n";
    std::printf("bench_tenant_flood: wrote %s\n", o.json.c_str());
  }
  if (own_work && !o.keep) fs::remove_all(o.work);
  return rc;
}
