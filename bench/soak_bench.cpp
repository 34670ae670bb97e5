// bench_soak: many concurrent clients against a running ragd (loopback), mixing streamed runs over
// SSE and WebSocket, plain runs and document uploads; about a third of the streamed runs disconnect
// after their first token and a third cancel it. Afterwards the daemon must be back to idle:
//   - no request stuck (running, waiting and in-flight all 0 within --settle-ms);
//   - every KV block back in the pool (run the daemon with runtime.hbm_cache=false, so that no
//     block is legitimately held by the cache);
//   - every accepted run counted exactly once in ragd_runs_total, and ragd_generation_tokens_total
//     at least the tokens the clients received;
//   - with --pid, resident memory at the end within --max-rss-growth of its value once the load
//     reached steady state (a quarter of the way in);
//   - /healthz answered all along (a probe thread, --health-ms deadline per probe).
// Exit status 0 when every check holds, 1 otherwise; a summary line per check is printed.
//
//   bench_soak --url http://127.0.0.1:PORT [--clients 256] [--seconds 60] [--max-tokens 48]
//              [--pid PID] [--max-rss-growth 0.05] [--settle-ms 30000] [--health-ms 2000] [--seed 1]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <simdjson.h>

#include "ragd/daemon/client.h"

#include "bench_args.h"

using namespace ragd;
using namespace ragd::daemon;
using Clock = std::chrono::steady_clock;

namespace {

struct Opts {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  int clients = 256;
  double seconds = 60;
  int max_tokens = 48;
  long pid = 0;
  double max_rss_growth = 0.05;
  int settle_ms = 30000;
  int health_ms = 2000;
  uint32_t seed = 1;
};

struct Tally {
  std::atomic<long> accepted{0}, refused{0}, failed{0}, tokens{0}, uploads{0}, disconnects{0}, cancels{0};
  std::atomic<long> completed{0};
};

long rss_kib(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

std::string run_body(const std::string& query, int max_tokens, bool stream) {
  std::string b = R"({"query":")" + query + R"(","max_tokens":)" + std::to_string(max_tokens) +
                  R"(,"ignore_eos":true)";
  if (stream) b += R"(,"stream":true)";
  return b + "}";
}

// One streamed run over SSE: 0 = read to the end, 1 = hang up after the first token.
void sse_run(const Opts& o, Tally& t, const std::string& q, int how) {
  HttpClient c(o.host, o.port, 60000);
  long seen = 0;
  SseParser sse([&](const std::string& ev, const std::string&) { seen += ev == "token"; });
  auto r = c.request_stream("POST", "/v1/pipelines/default/runs", run_body(q, o.max_tokens, true),
                            {{"Content-Type", "application/json"}}, [&](std::string_view d) {
                              sse.feed(d);
                              return !(how == 1 && seen > 0);
                            });
  if (!r.ok()) {
    ++t.failed;
    return;
  }
  if (r->status == 429 || r->status == 503) {
    ++t.refused;
    return;
  }
  if (r->status != 200) {
    ++t.failed;
    return;
  }
  ++t.accepted;
  t.tokens += seen;
  if (how == 1) {
    ++t.disconnects;
  } else {
    ++t.completed;
  }
}

// One streamed run over WebSocket: 0 = to the end, 1 = drop the socket after the first token,
// 2 = send cancel after the first token and read to `done`.
void ws_run(const Opts& o, Tally& t, const std::string& q, int how) {
  WsClient ws;
  if (!ws.connect(o.host, o.port, "/v1/stream").ok()) {
    if (ws.upgrade_status() == 429 || ws.upgrade_status() == 503) {
      ++t.refused;
    } else {
      ++t.failed;
    }
    return;
  }
  if (!ws.send_text(run_body(q, o.max_tokens, false)).ok()) {
    ++t.failed;
    return;
  }
  long seen = 0;
  bool accepted = false, cancelled = false;
  for (;;) {
    auto m = ws.read(60000);
    if (!m.ok() || m->kind != WsClient::Message::Kind::kText) {
      ++t.failed;
      return;
    }
    simdjson::dom::parser p;
    simdjson::dom::element e;
    std::string_view ev;
    if (p.parse(m->text).get(e) != simdjson::SUCCESS || e["event"].get(ev) != simdjson::SUCCESS) {
      ++t.failed;
      return;
    }
    if (ev == "error") {
      int64_t status = 0;
      if (e["error"]["status"].get(status) == simdjson::SUCCESS && (status == 429 || status == 503)) {
        ++t.refused;
      } else {
        ++t.failed;
      }
      return;
    }
    if (!accepted) {
      accepted = true;
      ++t.accepted;
    }
    if (ev == "token") {
      ++seen;
      ++t.tokens;
      if (seen == 1 && how == 1) {
        ++t.disconnects;
        return;  // the destructor drops the socket without a close frame
      }
      if (seen == 1 && how == 2 && !cancelled) {
        cancelled = true;
        ++t.cancels;
        if (!ws.send_text(R"({"type":"cancel"})").ok()) {
          ++t.failed;
          return;
        }
      }
    }
    if (ev == "done") {
      ++t.completed;
      (void)ws.close(1000);
      return;
    }
  }
}

void plain_run(const Opts& o, Tally& t, const std::string& q) {
  HttpClient c(o.host, o.port, 60000);
  auto r = c.request("POST", "/v1/pipelines/default/runs", run_body(q, o.max_tokens / 4 + 1, false),
                     {{"Content-Type", "application/json"}});
  if (!r.ok()) {
    ++t.failed;
  } else if (r->status == 429 || r->status == 503) {
    ++t.refused;
  } else if (r->status != 200) {
    ++t.failed;
  } else {
    ++t.accepted;
    ++t.completed;
  }
}

void upload(const Opts& o, Tally& t, int client, int n) {
  HttpClient c(o.host, o.port, 60000);
  const std::string id = "soak-" + std::to_string(client) + "-" + std::to_string(n % 4);
  auto r = c.request("POST", "/v1/documents",
                     R"({"id":")" + id + R"(","text":"soak document )" + std::to_string(n) +
                         R"( about alpha beta gamma and the delta of river )" + std::to_string(client) + R"("})",
                     {{"Content-Type", "application/json"}});
  if (r.ok() && r->status == 200) {
    ++t.uploads;
  } else if (r.ok() && (r->status == 429 || r->status == 503)) {
    ++t.refused;
  } else {
    ++t.failed;
  }
}

double sum_metric(const std::string& text, const std::string& name) {
  double s = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0) continue;
    const char c = line.size() > name.size() ? line[name.size()] : ' ';
    if (c != '{' && c != ' ') continue;
    s += std::atof(line.c_str() + line.rfind(' ') + 1);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  Opts o;
  ragd::bench::BenchArgs args("bench_soak");
  args.custom("url", "http://HOST:PORT", [&o](const std::string& v) {
    auto u = parse_url(v);
    if (!u.ok()) return u.status().to_string();
    o.host = u->host;
    o.port = u->port;
    return std::string();
  });
  args.opt("clients", &o.clients).opt("seconds", &o.seconds).opt("max-tokens", &o.max_tokens).opt("pid", &o.pid);
  args.opt("max-rss-growth", &o.max_rss_growth).opt("settle-ms", &o.settle_ms).opt("health-ms", &o.health_ms);
  args.opt("seed", &o.seed);
  if (!args.parse(argc, argv)) return 2;
  if (o.port == 0 || o.clients <= 0 || o.seconds <= 0 || o.max_tokens <= 0) {
    std::fprintf(stderr, "usage: bench_soak --url http://127.0.0.1:PORT [--clients N] [--seconds S] [--pid PID] ...\n");
    return 2;
  }
  HttpClient admin(o.host, o.port, 10000);
  auto m0 = admin.request("GET", "/metrics");
  if (!m0.ok() || m0->status != 200) {
    std::fprintf(stderr, "bench_soak: GET /metrics failed\n");
    return 1;
  }
  const double runs0 = sum_metric(m0->body, "ragd_runs_total");
  const double gen0 = sum_metric(m0->body, "ragd_generation_tokens_total");

  Tally t;
  const auto t0 = Clock::now();
  const auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.seconds));
  std::atomic<bool> stop{false};
  std::atomic<long> health_ok{0}, health_bad{0}, health_worst_ms{0};
  std::thread health([&] {
    while (!stop) {
      const auto h0 = Clock::now();
      HttpClient c(o.host, o.port, o.health_ms);
      auto r = c.request("GET", "/healthz");
      const long ms = static_cast<long>(std::chrono::duration<double, std::milli>(Clock::now() - h0).count());
      if (r.ok() && r->status == 200 && ms <= o.health_ms) {
        ++health_ok;
      } else {
        ++health_bad;
      }
      long w = health_worst_ms.load();
      while (ms > w && !health_worst_ms.compare_exchange_weak(w, ms)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  long rss_steady = -1;
  std::thread rss([&] {
    if (o.pid <= 0) return;
    std::this_thread::sleep_until(t0 + (end - t0) / 4);
    rss_steady = rss_kib(o.pid);
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 rng(o.seed * 7919u + static_cast<uint32_t>(c));
      const char* topics[] = {"alpha", "beta river", "gamma delta", "the soak document"};
      for (int n = 0; Clock::now() < end; ++n) {
        const std::string q = std::string("tell me about ") + topics[rng() % 4];
        const int kind = static_cast<int>(rng() % 9);
        if (kind < 3) {
          sse_run(o, t, q, kind == 0 ? 1 : 0);  // a third of SSE runs hang up
        } else if (kind < 6) {
          ws_run(o, t, q, kind - 3);  // complete / drop / cancel, a third each
        } else if (kind < 8) {
          plain_run(o, t, q);
        } else {
          upload(o, t, c, n);
        }
      }
    });
  }
  for (auto& th : clients) th.join();
  const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
  rss.join();

  // Settle: nothing running, waiting or in flight; every block back.
  bool idle = false;
  std::string last;
  long free_blocks = -1, blocks = -1;
  const auto settle_end = Clock::now() + std::chrono::milliseconds(o.settle_ms);
  while (Clock::now() < settle_end) {
    auto r = admin.request("GET", "/v1/cache/stats");
    if (r.ok() && r->status == 200) {
      last = r->body;
      simdjson::dom::parser p;
      simdjson::dom::element e;
      int64_t running = -1, waiting = -1, in_flight = -1, fb = -1, nb = -1;
      if (p.parse(r->body).get(e) == simdjson::SUCCESS) {
        auto num = [&](const char* ptr) {
          int64_t v = -1;
          return e.at_pointer(ptr).get(v) == simdjson::SUCCESS ? v : -1;
        };
        running = num("/requests/running");
        waiting = num("/requests/waiting");
        in_flight = num("/requests/in_flight");
        fb = num("/executor/kv_pool/free_blocks");
        nb = num("/executor/kv_pool/blocks");
      }
      free_blocks = fb;
      blocks = nb;
      if (running == 0 && waiting == 0 && in_flight == 0 && fb == nb && nb > 0) {
        idle = true;
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop = true;
  health.join();
  const long rss_end = o.pid > 0 ? rss_kib(o.pid) : -1;
  auto m1 = admin.request("GET", "/metrics");
  const double runs = m1.ok() ? sum_metric(m1->body, "ragd_runs_total") - runs0 : -1;
  const double gen = m1.ok() ? sum_metric(m1->body, "ragd_generation_tokens_total") - gen0 : -1;

  bool ok = true;
  auto check = [&](bool cond, const std::string& what) {
    std::printf("%-4s %s\n", cond ? "ok" : "FAIL", what.c_str());
    ok = ok && cond;
  };
  std::printf("bench_soak: %d clients for %.1f s: %ld runs accepted (%ld completed, %ld disconnected after the first "
              "token, %ld cancelled), %ld refused (429/503), %ld uploads, %ld failed requests, %ld tokens received "
              "(%.0f/s)\n",
              o.clients, load_s, t.accepted.load(), t.completed.load(), t.disconnects.load(), t.cancels.load(),
              t.refused.load(), t.uploads.load(), t.failed.load(), t.tokens.load(), t.tokens.load() / load_s);
  check(t.failed == 0, "no request failed (" + std::to_string(t.failed.load()) + " failed)");
  check(idle, "idle again: nothing running, waiting or in flight, KV pool " + std::to_string(free_blocks) + " / " +
                  std::to_string(blocks) + " blocks free" + (idle ? "" : "; last stats: " + last.substr(0, 400)));
  check(runs == static_cast<double>(t.accepted), "ragd_runs_total grew by " + std::to_string(static_cast<long>(runs)) +
                                                     ", accepted runs " + std::to_string(t.accepted.load()));
  check(gen >= static_cast<double>(t.tokens), "ragd_generation_tokens_total grew by " +
                                                  std::to_string(static_cast<long>(gen)) + " >= tokens received " +
                                                  std::to_string(t.tokens.load()));
  check(health_bad == 0, "/healthz: " + std::to_string(health_ok.load()) + " answered, " +
                             std::to_string(health_bad.load()) + " late or failed (worst " +
                             std::to_string(health_worst_ms.load()) + " ms, deadline " + std::to_string(o.health_ms) +
                             " ms)");
  if (o.pid > 0) {
    const double growth = rss_steady > 0 ? static_cast<double>(rss_end - rss_steady) / rss_steady : 1e9;
    char g[64];
    std::snprintf(g, sizeof g, "%+.1f %%", 100 * growth);
    check(rss_steady > 0 && rss_end > 0 && growth <= o.max_rss_growth,
          "resident memory " + std::to_string(rss_steady / 1024) + " MiB at steady state, " +
              std::to_string(rss_end / 1024) + " MiB at the end (" + g + ", limit +" +
              std::to_string(static_cast<int>(100 * o.max_rss_growth)) + " %)");
  }
  return ok ? 0 : 1;
}
