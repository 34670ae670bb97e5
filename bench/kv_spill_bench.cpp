// Decode with a long sequence's KV where it lives (seqparallel/kv_spill.h): all in the pool, spilled
// to host memory, spilled to an SSD file, on one worker, against each other in the same run.
//
//   bench_kv_spill [--preset tiny|small] [--tokens 65536,131072] [--decode 16] [--chunk 8192]
//                  [--pool-tokens 16384] [--dir /var/tmp] [--probe-mb 1024] [--fill prefill|random]
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
//
// --fill random puts the same random KV rows (every layer, positions 0 .. n-1) where each run keeps
// them — the pool's newest --pool-tokens, the older ones spilled in --chunk extents — instead of a
// prefill, which at a million tokens takes the tiny shape 40 minutes per run. Decode reads the KV
// it is given whatever its values, so its time is the prefilled sequence's; the three runs hold
// identical rows, so their greedy tokens and logits are still compared. "prefill s" is the fill's.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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
struct RunResult;
engine::ModelOptions options_for(const engine::ModelConfig& cfg, int64_t pool_tokens);

struct RunResult {
  double prefill_s = 0, decode_tps = 0, decode_s = 0;
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  SpillStats spill;
  size_t peak_rss = 0;
};

// n tokens of KV as random rows in [-1, 1), the same for every run: rows [0, n - resident) spilled
// in extents of `chunk` tokens (through a staging table in the pool), the newest `resident` in
// `shard`, every row labelled with its position. The caller's decode then starts at position n.
Status fill_random(engine::KvPool& pool, int64_t n, int64_t resident, int chunk, KvSpill* spill,
                   engine::BlockTable* shard) {
  // The spilled extents are staged in a pool of their own, so the model's pool holds `resident`
  // tokens as a prefill leaves it.
  std::unique_ptr<engine::KvPool> stage;
  if (resident < n) {
    const size_t blocks = static_cast<size_t>(chunk + pool.layout().block_size - 1) / pool.layout().block_size;
    RAGD_ASSIGN_OR_RETURN(stage, engine::KvPool::create(pool.layout(), blocks));
  }
  const engine::KvLayout& lay = pool.layout();
  const size_t row = lay.token_floats();
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto rows = [&](engine::KvPool& into, int64_t begin, int count, engine::BlockTable* t) -> Status {
    // [num_layers][count, kv_heads, head_dim] for K and V; the generator runs in position order, so
    // every run draws the same value for the same (position, layer) whatever its split.
    std::vector<float> k(static_cast<size_t>(lay.num_layers) * count * row), v(k.size());
    for (int64_t i = 0; i < count; ++i)
      for (int l = 0; l < lay.num_layers; ++l)
        for (float* dst : {&k[(static_cast<size_t>(l) * count + i) * row], &v[(static_cast<size_t>(l) * count + i) * row]})
          for (size_t j = 0; j < row; ++j) {
            state ^= state << 13, state ^= state >> 7, state ^= state << 17;
            dst[j] = static_cast<float>(static_cast<int64_t>(state >> 40) - (int64_t{1} << 23)) / float(1 << 23);
          }
    if (!t->append(into, count, k.data(), v.data())) return Status::ResourceExhausted("fill: the pool is full");
    std::vector<int32_t> pos(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) pos[i] = static_cast<int32_t>(begin + i);
    t->set_positions(t->num_tokens() - count, pos);
    return Status::OK();
  };
  for (int64_t begin = 0; begin < n - resident; begin += chunk) {
    const int count = static_cast<int>(std::min<int64_t>(chunk, n - resident - begin));
    engine::BlockTable staging;
    Status st = rows(*stage, begin, count, &staging);
    if (st.ok()) st = spill->append(*stage, staging, count);
    staging.release(*stage);
    RAGD_RETURN_IF_ERROR(st);
  }
  for (int64_t begin = n - resident; begin < n; begin += chunk)
    RAGD_RETURN_IF_ERROR(rows(pool, begin, static_cast<int>(std::min<int64_t>(chunk, n - begin)), shard));
  return Status::OK();
}

RunResult run_filled(const engine::ModelConfig& cfg, int64_t n, int decode, int chunk, int64_t pool_tokens,
                     const SpillOptions& spill);

RunResult run(const engine::ModelConfig& cfg, const std::vector<int32_t>& prompt, int decode, int chunk,
           int64_t pool_tokens, const SpillOptions& spill, bool random_fill) {
  if (random_fill) return run_filled(cfg, static_cast<int64_t>(prompt.size()), decode, chunk, pool_tokens, spill);
  auto m = engine::Model::create(cfg, engine::make_random_weights(cfg, 7), options_for(cfg, pool_tokens));
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

engine::ModelOptions options_for(const engine::ModelConfig& cfg, int64_t pool_tokens) {
  engine::ModelOptions o;
  o.num_threads = 0;
  o.kv_pool_bytes = static_cast<size_t>(pool_tokens + 64) * engine::kv_layout(cfg, o).token_bytes();
  return o;
}

RunResult run_filled(const engine::ModelConfig& cfg, int64_t n, int decode, int chunk, int64_t pool_tokens,
                     const SpillOptions& spill) {
  auto m = engine::Model::create(cfg, engine::make_random_weights(cfg, 7), options_for(cfg, pool_tokens));
  auto comms = make_thread_group(1).value();
  RunResult r;
  engine::KvPool& pool = (*m)->kv_pool();
  std::unique_ptr<KvSpill> sp;
  // Without a spill the pool holds the whole sequence; with one, its newest tokens in whole blocks,
  // leaving room for the decode steps.
  const int bs = pool.layout().block_size;
  const int64_t resident = spill.enabled() ? std::max<int64_t>(0, (pool_tokens - decode) / bs * bs) : n;
  if (spill.enabled()) sp = KvSpill::create(pool.layout(), spill).value();
  engine::BlockTable shard;
  auto t0 = Clock::now();
  Status st = fill_random(pool, n, std::min(n, resident), chunk, sp.get(), &shard);
  r.prefill_s = since(t0);
  const SpillStats before = sp ? sp->stats() : SpillStats{};
  std::vector<float> logits;
  {
    ShardedDecoder dec(**m, *comms[0], &shard, sp.get());
    int32_t token = 1;
    t0 = Clock::now();
    for (int i = 0; i < decode && st.ok(); ++i) {
      st = dec.step(token, static_cast<int32_t>(n + i), &logits, nullptr);
      if (!st.ok()) break;
      r.logits.push_back(logits);
      token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      r.tokens.push_back(token);
    }
    r.decode_s = since(t0);
  }
  if (!st.ok()) {
    std::fprintf(stderr, "run: %s\n", st.to_string().c_str());
    std::exit(1);
  }
  r.decode_tps = decode / r.decode_s;
  if (sp) {
    r.spill = sp->stats();
    r.spill.bytes_read -= before.bytes_read;
    r.spill.wait_s -= before.wait_s;
    r.spill.read_s -= before.read_s;
  }
  shard.release(pool);
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
  std::string preset_name = "tiny", dir = "/var/tmp", fill = "prefill";
  std::vector<int64_t> lengths = {65536, 131072};
  int decode = 16, chunk = 8192;
  int64_t pool_tokens = 16384, probe_mb = 1024;
  ragd::bench::BenchArgs args("bench_kv_spill");
  args.opt("preset", &preset_name).list("tokens", &lengths).opt("decode", &decode).opt("chunk", &chunk);
  args.opt("pool-tokens", &pool_tokens).opt("dir", &dir).opt("probe-mb", &probe_mb).opt("fill", &fill);
  if (!args.parse(argc, argv)) return 2;
  if (fill != "prefill" && fill != "random") {
    std::fprintf(stderr, "bench_kv_spill: --fill must be prefill or random, not '%s'\n", fill.c_str());
    return 2;
  }
  const bool random_fill = fill == "random";
  const engine::ModelConfig cfg = preset(preset_name);
  // A VM's disk varies from minute to minute: probed before the runs and again after them, the
  // faster of the two taken as the device's bandwidth ("of probe"), so the rows are printed last.
  const double before = probe_read_bandwidth(dir, probe_mb);
  struct Row {
    int64_t n;
    const char* name;
    RunResult r;
    double base_tps;
    double diff;
    bool same;
  };
  std::vector<Row> rows;
  std::vector<std::string> notes;
  for (int64_t n : lengths) {
    std::mt19937 g(11);
    std::vector<int32_t> prompt(static_cast<size_t>(n));
    for (auto& t : prompt) t = static_cast<int32_t>(g() % cfg.vocab_size);
    SpillOptions dram, ssd;
    dram.dram_bytes = int64_t{64} << 30;
    ssd.dir = dir;
    RunResult base = run(cfg, prompt, decode, chunk, n + decode + 64, SpillOptions{}, random_fill);
    RunResult rd = run(cfg, prompt, decode, chunk, pool_tokens, dram, random_fill);
    RunResult rs = run(cfg, prompt, decode, chunk, pool_tokens, ssd, random_fill);
    char note[160];
    std::snprintf(note, sizeof note, "%lld tokens: direct reads %s; peak RSS %.0f MB", static_cast<long long>(n),
                  rs.spill.direct_io ? "yes" : "no (page cache)", rs.peak_rss / 1e6);
    notes.push_back(note);
    const double d_dram = max_diff(rd, base), d_ssd = max_diff(rs, base);
    const bool s_dram = rd.tokens == base.tokens, s_ssd = rs.tokens == base.tokens;
    const double tps = base.decode_tps;
    rows.push_back({n, "pool", std::move(base), tps, 0.0, true});
    rows.push_back({n, "dram", std::move(rd), tps, d_dram, s_dram});
    rows.push_back({n, "ssd", std::move(rs), tps, d_ssd, s_ssd});
  }
  const double after = probe_read_bandwidth(dir, probe_mb);
  const double probe = std::max(before, after);
  std::printf("SSD in %s: sequential direct reads %.2f GB/s before the runs, %.2f after (%lld MiB file, 4 MiB "
              "requests)\n",
              dir.c_str(), before, after, static_cast<long long>(probe_mb));
  std::printf("%-9s %-5s %10s %11s %8s %12s %12s %10s %9s %8s %10s %9s\n", "tokens",
              "KV", random_fill ? "fill s" : "prefill s", "decode t/s", "vs pool", "spilled MB", "SSD MB/tok",
              "read GB/s", "of probe", "waited", "max|dlog|", "tokens=");
  for (const Row& row : rows) {
    const RunResult& r = row.r;
    const double spilled_mb = (r.spill.dram_bytes + r.spill.ssd_bytes) / 1e6;
    const double per_tok = r.spill.bytes_read / 1e6 / std::max(decode, 1);
    const double rate = r.spill.bytes_read / r.decode_s / 1e9;
    std::printf("%-9lld %-5s %10.2f %11.2f %7.2fx %12.1f %12.1f %10.2f %8.0f%% %7.0f%% %10.2g %9s\n",
                static_cast<long long>(row.n), row.name, r.prefill_s, r.decode_tps, r.decode_tps / row.base_tps,
                spilled_mb, per_tok, rate, probe > 0 ? 100 * rate / probe : 0.0, 100 * r.spill.wait_s / r.decode_s,
                row.diff, row.same ? "yes" : "NO");
  }
  for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  return 0;
}
