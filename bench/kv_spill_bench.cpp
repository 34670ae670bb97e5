// Decode with a long sequence's KV where it lives (seqparallel/kv_spill.h): all in the pool, spilled
// to host memory, spilled to an SSD file, on one worker, against each other in the same run.
//
//   bench_kv_spill [--preset tiny|small] [--tokens 65536,131072] [--decode 16] [--chunk 8192]
//                  [--pool-tokens 16384] [--dir /var/tmp] [--probe-mb 1024]
//
// First the SSD's sequential read bandwidth in --dir: a --probe-mb file written, synced and dropped
// from the page cache, then read with direct I/O in 4 MiB requests (the spill reads one layer of an
// extent per request). Then per length, three prefills of the same random prompt:
//   pool  — the pool holds the whole sequence (the baseline);
//   dram  — a pool of --pool-tokens, the rest spilled to host memory;
//   ssd   — the same pool, the rest spilled to the file (direct reads, read-ahead of the next layer);
// each followed by --decode greedy steps. Reported: prefill seconds, decode tok/s and its ratio to
// the pool's, bytes read from SSD per token, the read rate during decode and its fraction of the
// probe, the share of decode time attention waited for reads, and whether the greedy tokens and
// logits agree with the pool's (max |diff|).
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ragd/engine/model.h"
#include "ragd/engine/random_weights.h"
#include "ragd/kernels/threads.h"
#include "ragd/seqparallel/sharded_sequence.h"
#include "ragd/seqparallel/thread_communicator.h"

#include "bench_args.h"

using namespace ragd;               // NOLINT
using namespace ragd::seqparallel;  // NOLINT

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

engine::ModelConfig preset(const std::string& name) {
  engine::ModelConfig c;
  c.architecture = engine::Architecture::kLlama;
  c.rms_norm_eps = 1e-5f;
  c.max_position_embeddings = 1 << 21;
  if (name == "small") {
    c.hidden_size = 512, c.num_hidden_layers = 8, c.num_attention_heads = 8, c.num_key_value_heads = 4;
    c.intermediate_size = 1408, c.vocab_size = 32000;
  } else {
    c.hidden_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2;
    c.intermediate_size = 176, c.vocab_size = 512;
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

// Sequential direct reads of a freshly written file: GB/s (0 when direct I/O is refused).
double probe_read_bandwidth(const std::string& dir, int64_t mb) {
  const std::string path = dir + "/ragd-ssd-probe.bin";
  const size_t req = size_t{4} << 20;
  void* buf = std::aligned_alloc(4096, req);
  std::memset(buf, 0x5a, req);
  int fd = ::open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0) return 0;
  for (int64_t done = 0; done < mb << 20; done += static_cast<int64_t>(req)) {
    if (::write(fd, buf, req) != static_cast<ssize_t>(req)) break;
  }
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
  fd = ::open(path.c_str(), O_RDONLY | O_DIRECT);
  double gbs = 0;
  if (fd >= 0) {
    const auto t0 = Clock::now();
    int64_t got = 0;
    for (ssize_t r; (r = ::read(fd, buf, req)) > 0;) got += r;
    gbs = static_cast<double>(got) / since(t0) / 1e9;
    ::close(fd);
  }
  ::unlink(path.c_str());
  std::free(buf);
  return gbs;
}

size_t peak_resident_bytes();

struct RunResult {
  double prefill_s = 0, decode_tps = 0, decode_s = 0;
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  SpillStats spill;
  size_t peak_rss = 0;
};

RunResult run(const engine::ModelConfig& cfg, const std::vector<int32_t>& prompt, int decode, int chunk,
           int64_t pool_tokens, const SpillOptions& spill) {
  engine::ModelOptions o;
  o.num_threads = 0;
  const size_t per_token = engine::kv_layout(cfg, o).token_bytes();
  o.kv_pool_bytes = static_cast<size_t>(pool_tokens + 64) * per_token;
  auto m = engine::Model::create(cfg, engine::make_random_weights(cfg, 7), o);
  if (!m.ok()) {
    std::fprintf(stderr, "model: %s\n", m.status().to_string().c_str());
    std::exit(1);
  }
  auto comms = make_thread_group(1).value();
  RunResult r;
  ShardedSequence seq(**m, *comms[0], PartitionKind::kZigzag, chunk, spill);
  std::vector<float> logits;
  auto t0 = Clock::now();
  Status st = seq.prefill(prompt, &logits);
  r.prefill_s = since(t0);
  const SpillStats before = seq.spill_stats();
  t0 = Clock::now();
  for (int i = 0; i < decode && st.ok(); ++i) {
    r.logits.push_back(logits);
    r.tokens.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    st = seq.decode(r.tokens.back(), &logits);
  }
  r.decode_s = since(t0);
  if (!st.ok()) {
    std::fprintf(stderr, "run: %s\n", st.to_string().c_str());
    std::exit(1);
  }
  r.decode_tps = decode / r.decode_s;
  r.spill = seq.spill_stats();
  r.spill.bytes_read -= before.bytes_read;
  r.spill.wait_s -= before.wait_s;
  r.spill.read_s -= before.read_s;
  r.peak_rss = peak_resident_bytes();
  return r;
}

size_t peak_resident_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<size_t>(u.ru_maxrss) * 1024;
}

double max_diff(const RunResult& a, const RunResult& b) {
  double d = 0;
  for (size_t i = 0; i < std::min(a.logits.size(), b.logits.size()); ++i)
    for (size_t j = 0; j < a.logits[i].size(); ++j) d = std::max(d, std::fabs(double(a.logits[i][j]) - b.logits[i][j]));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset_name = "tiny", dir = "/var/tmp";
  std::vector<int64_t> lengths = {65536, 131072};
  int decode = 16, chunk = 8192;
  int64_t pool_tokens = 16384, probe_mb = 1024;
  ragd::bench::BenchArgs args("bench_kv_spill");
  args.opt("preset", &preset_name).list("tokens", &lengths).opt("decode", &decode).opt("chunk", &chunk);
  args.opt("pool-tokens", &pool_tokens).opt("dir", &dir).opt("probe-mb", &probe_mb);
  if (!args.parse(argc, argv)) return 2;
  const engine::ModelConfig cfg = preset(preset_name);
  const double probe = probe_read_bandwidth(dir, probe_mb);
  std::printf("SSD in %s: sequential direct reads %.2f GB/s (%lld MiB file, 4 MiB requests)\n", dir.c_str(), probe,
              static_cast<long long>(probe_mb));
  std::printf("%-9s %-5s %10s %11s %8s %12s %12s %10s %9s %8s %10s %9s\n", "tokens", "KV", "prefill s", "decode t/s",
              "vs pool", "spilled MB", "SSD MB/tok", "read GB/s", "of probe", "waited", "max|dlog|", "tokens=");
  for (int64_t n : lengths) {
    std::mt19937 g(11);
    std::vector<int32_t> prompt(static_cast<size_t>(n));
    for (auto& t : prompt) t = static_cast<int32_t>(g() % cfg.vocab_size);
    SpillOptions dram, ssd;
    dram.dram_bytes = int64_t{64} << 30;
    ssd.dir = dir;
    const RunResult base = run(cfg, prompt, decode, chunk, n + decode + 64, SpillOptions{});
    const RunResult rd = run(cfg, prompt, decode, chunk, pool_tokens, dram);
    const RunResult rs = run(cfg, prompt, decode, chunk, pool_tokens, ssd);
    for (const auto& [name, r] : {std::pair<const char*, const RunResult&>{"pool", base}, {"dram", rd}, {"ssd", rs}}) {
      const double spilled_mb = (r.spill.dram_bytes + r.spill.ssd_bytes) / 1e6;
      const double per_tok = r.spill.bytes_read / 1e6 / std::max(decode, 1);
      const double rate = r.spill.bytes_read / r.decode_s / 1e9;
      std::printf("%-9lld %-5s %10.2f %11.2f %7.2fx %12.1f %12.1f %10.2f %8.0f%% %7.0f%% %10.2g %9s\n",
                  static_cast<long long>(n), name, r.prefill_s, r.decode_tps, r.decode_tps / base.decode_tps, spilled_mb,
                  per_tok, rate, probe > 0 ? 100 * rate / probe : 0.0, 100 * r.spill.wait_s / r.decode_s,
                  max_diff(r, base), r.tokens == base.tokens ? "yes" : "NO");
    }
    std::printf("          direct reads: %s; peak RSS %.0f MB\n", rs.spill.direct_io ? "yes" : "no (page cache)",
                rs.peak_rss / 1e6);
  }
  return 0;
}
