// The KV-event publisher's cost with ZeroMQ CURVE on and off: a publisher bound on loopback, one
// subscriber (a CURVE client with an allowed key, or plaintext), N BlockStored events of one
// 16-token block each queued as fast as the caller can; measured: wall time until the subscriber
// has every batch, and the process's CPU time (publisher thread + subscriber + caller). Both
// modes alternate `rounds` times; medians printed.
//   bench_kv_events [--events 200000] [--rounds 5]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "ragd/kvstore/kv_events.h"
#include "bench_args.h"

using namespace ragd::kvstore;

namespace {

double cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct Run {
  double wall_s = 0, cpu_s = 0;
  uint64_t batches = 0, events = 0;
};

Run run_once(bool curve, int events, int port) {
  const std::string ep = "tcp://127.0.0.1:" + std::to_string(port);
  KvEventsOptions o;
  o.endpoint = ep;
  o.mode = KvEventsSocketMode::kBind;
  CurveKeyPair server, client;
  if (curve) {
    server = *make_curve_keypair();
    client = *make_curve_keypair();
    o.curve_secret_key_file = "/tmp/ragd-bench-events-" + std::to_string(::getpid()) + ".key";
    o.curve_allowed_clients_file = o.curve_secret_key_file + ".allowed";
    std::ofstream(o.curve_secret_key_file) << server.secret_key << "\n";
    std::ofstream(o.curve_allowed_clients_file) << client.public_key << "\n";
  }
  auto pub = KvEventPublisher::start(o);
  if (!pub.ok()) {
    std::fprintf(stderr, "%s\n", pub.status().to_string().c_str());
    std::exit(1);
  }
  zmq::context_t ctx;
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::subscribe, "");
  sub.set(zmq::sockopt::rcvhwm, 0);
  if (curve) {
    sub.set(zmq::sockopt::curve_serverkey, server.public_key);
    sub.set(zmq::sockopt::curve_publickey, client.public_key);
    sub.set(zmq::sockopt::curve_secretkey, client.secret_key);
  }
  sub.connect(ep);
  // Joined: a probe event arrives.
  for (;;) {
    KvEvent e;
    e.kind = KvEvent::Kind::kAllBlocksCleared;
    (*pub)->publish(e);
    zmq::pollitem_t it{sub.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&it, 1, std::chrono::milliseconds(50)) > 0) break;
  }
  std::vector<zmq::message_t> msg;
  while (zmq::recv_multipart(sub, std::back_inserter(msg), zmq::recv_flags::dontwait)) msg.clear();
  const uint64_t base = (*pub)->counters().events;
  std::vector<int32_t> tokens(16);
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_s();
  std::thread producer([&] {
    for (int i = 0; i < events; ++i) {
      KvEvent e;
      e.kind = KvEvent::Kind::kBlockStored;
      e.block_hashes = {static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull};
      for (int t = 0; t < 16; ++t) tokens[static_cast<size_t>(t)] = i + t;
      e.token_ids = tokens;
      e.block_size = 16;
      e.medium = "GPU";
      (*pub)->publish(std::move(e));
    }
  });
  // Received = the publisher sent every event and the subscriber drained the socket.
  uint64_t got_batches = 0;
  for (;;) {
    zmq::pollitem_t it{sub.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&it, 1, std::chrono::milliseconds(200)) > 0) {
      while (zmq::recv_multipart(sub, std::back_inserter(msg), zmq::recv_flags::dontwait)) {
        ++got_batches;
        msg.clear();
      }
    } else if ((*pub)->counters().events - base >= static_cast<uint64_t>(events)) {
      break;
    }
  }
  producer.join();
  Run r;
  r.cpu_s = cpu_s() - c0;
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() - 0.2;  // the last idle poll
  r.batches = got_batches;
  r.events = (*pub)->counters().events - base;
  (*pub)->stop();
  if (curve) {
    std::remove(o.curve_secret_key_file.c_str());
    std::remove(o.curve_allowed_clients_file.c_str());
  }
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int events = 200000, rounds = 5;
  ragd::bench::BenchArgs args("bench_kv_events");
  args.opt("events", &events).opt("rounds", &rounds);
  if (!args.parse(argc, argv)) return 2;
  std::vector<double> wall[2], cpu[2];
  uint64_t batches[2] = {0, 0};
  int port = 47000 + (::getpid() % 1000) * 2;
  for (int r = 0; r < rounds; ++r)
    for (int curve = 0; curve < 2; ++curve) {
      const Run x = run_once(curve == 1, events, port++);
      wall[curve].push_back(x.wall_s);
      cpu[curve].push_back(x.cpu_s);
      batches[curve] += x.batches;
      std::printf("round %d %-9s wall %.3f s, cpu %.3f s, %llu batches, %llu events\n", r, curve ? "CURVE" : "plaintext",
                  x.wall_s, x.cpu_s, static_cast<unsigned long long>(x.batches), static_cast<unsigned long long>(x.events));
    }
  std::printf("\n| mode | events/s (wall, median) | CPU µs per event (median) | batches per round |\n|---|---:|---:|---:|\n");
  for (int c = 0; c < 2; ++c)
    std::printf("| %s | %.0f | %.2f | %.0f |\n", c ? "CURVE" : "plaintext", events / median(wall[c]),
                1e6 * median(cpu[c]) / events, static_cast<double>(batches[c]) / rounds);
  std::printf("\nCURVE / plaintext: wall %.3fx, CPU %.3fx\n", median(wall[1]) / median(wall[0]), median(cpu[1]) / median(cpu[0]));
  return 0;
}
