// Retrieval benchmark: ingest throughput (MB/s, chunks/s) through the full Corpus path (read ->
// chunk -> embed -> durable RocksDB batch -> FAISS add) and query latency p50/p99 (embed + search
// + chunk fetch) at ~100k chunks for each index type, plus recall@10 of each type against Flat on
// the same queries.
//
//   bench_retrieval [--chunks 100000] [--chunk-tokens 64] [--queries 1000]
//                   [--types "Flat;faiss-Flat;IVF1024,Flat;HNSW32"] [--tokenizer path/tokenizer.json]
//                   [--dir /tmp/x] [--threads 1] [--vectors 100000] [--vector-dim 128]
// --vectors N first measures the bare VectorIndex on N clustered synthetic vectors (recall@10 of
// each type against Flat at default search params, latency; `faiss-Flat` is FAISS's own
// IndexFlatIP::search on the same vectors, the baseline of ragd's BLAS flat scan); --chunks 0
// skips the corpus part.
// --tenants T (default 0 = off) adds tenant isolation: vector i (document i) belongs to tenant
// i % (T + 1), 0 being shared. The vector part then compares, per index type and for each query
// of one tenant (its own + the shared vectors): no filter (not isolated), the search-time
// IdFilter that ragd uses, and per-tenant partitions (one index per tenant plus one shared,
// both searched, top-k merged); recall@10 is against exact filtered search. The corpus part
// measures Corpus::search unscoped and scoped to the query document's tenant.
//   --tenant-types "Flat;IVF1024,Flat;HNSW32" picks the types of the tenant comparison.
//
// The corpus part's rows: a type as in --types, searched in --mode (dense by default, the
// vector index alone; lexical or hybrid search the BM25 index too); a type suffixed "/nolexical"
// (e.g. "Flat/nolexical") is a corpus that keeps no lexical index (CorpusOptions::lexical_index
// off), the ingest baseline of the lexical index's cost measured in the same run; "/termvec" embeds with
// the shipped term vectors (models/ragd-termvec) instead of the hashing embedder. Each row reports
// the data directory's size on disk and the process's resident memory after the queries.
//
// Without --tokenizer a built-in word tokenizer (one token per word / punctuation byte) chunks
// the text; with one, the engine's tokenizer does. Documents are synthetic: topic vocabularies of
// pseudo-words, seeded, so runs are repeatable.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <faiss/IndexFlat.h>

#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/corpus.h"

#include "bench_args.h"

using namespace ragd;
using namespace ragd::retrieval;
using Clock = std::chrono::steady_clock;

namespace {

class WordTokenizer final : public engine::Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view text, bool = false, bool = true) const override {
    std::vector<int32_t> out;
    size_t i = 0;
    while (i < text.size()) {
      unsigned char c = static_cast<unsigned char>(text[i]);
      if (std::isalnum(c) || (c == ' ' && i + 1 < text.size() && std::isalnum(static_cast<unsigned char>(text[i + 1])))) {
        size_t j = i + 1;
        while (j < text.size() && std::isalnum(static_cast<unsigned char>(text[j]))) ++j;
        out.push_back(256 + static_cast<int32_t>(std::hash<std::string_view>{}(text.substr(i, j - i)) % 60000));
        i = j;
      } else {
        out.push_back(c);
        ++i;
      }
    }
    return out;
  }
  std::string decode(std::span<const int32_t>, bool = false) const override { return {}; }
  std::string token_bytes(int32_t id) const override { return id < 256 ? std::string(1, static_cast<char>(id)) : "w" + std::to_string(id); }
  std::optional<int32_t> token_to_id(std::string_view) const override { return std::nullopt; }
  bool is_special(int32_t) const override { return false; }
  int32_t vocab_size() const override { return 256 + 60000; }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::vector<int32_t> eos_ids() const override { return {}; }
};

std::vector<std::string> vocabulary(size_t n, std::mt19937_64& rng) {
  static const char* syl[] = {"ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "gu",
                              "ri", "fe", "ba", "no", "te", "li", "mo", "xu", "wa", "che", "shi", "qua"};
  std::set<std::string> seen;
  std::vector<std::string> out;
  while (out.size() < n) {
    std::string w;
    int len = 2 + static_cast<int>(rng() % 3);
    for (int i = 0; i < len; ++i) w += syl[rng() % 24];
    if (seen.insert(w).second) out.push_back(w);
  }
  return out;
}

std::string paragraph(std::mt19937_64& rng, const std::vector<std::string>& vocab, size_t topic) {
  std::string t;
  int sentences = 3 + static_cast<int>(rng() % 4);
  for (int s = 0; s < sentences; ++s) {
    int words = 6 + static_cast<int>(rng() % 10);
    for (int w = 0; w < words; ++w) {
      size_t idx = (rng() % 10 < 7) ? (topic * 50 + rng() % 50) % vocab.size() : rng() % 500;
      t += vocab[idx];
      t += w + 1 < words ? " " : ". ";
    }
  }
  t.back() = '\n';
  return t + "\n";
}

// Clustered unit vectors (mixture of Gaussians), seeded.
std::vector<float> clustered(size_t n, int dim, int clusters, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centers(static_cast<size_t>(clusters) * static_cast<size_t>(dim));
  for (auto& c : centers) c = g(rng);
  std::vector<float> x(n * static_cast<size_t>(dim));
  for (size_t i = 0; i < n; ++i) {
    size_t c = rng() % static_cast<size_t>(clusters);
    double norm = 0;
    float* row = &x[i * static_cast<size_t>(dim)];
    for (int j = 0; j < dim; ++j) {
      row[j] = centers[c * static_cast<size_t>(dim) + static_cast<size_t>(j)] + 0.6f * g(rng);
      norm += static_cast<double>(row[j]) * row[j];
    }
    for (int j = 0; j < dim; ++j) row[j] /= static_cast<float>(std::sqrt(norm));
  }
  return x;
}

double pct(std::vector<double> v, double p);

// Vector-level recall@10 against Flat and search latency at the default search parameters.
void vector_section(size_t n, int dim, size_t nq, const std::string& types, int threads) {
  std::vector<float> all = clustered(n + nq, dim, 1000, 99);
  std::vector<float> xb(all.begin(), all.begin() + static_cast<long>(n * static_cast<size_t>(dim)));
  std::vector<float> xq(all.begin() + static_cast<long>(n * static_cast<size_t>(dim)), all.end());
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = i + 1;
  std::printf("vectors: %zu clustered unit vectors, dim %d, %zu held-out queries, default search params\n", n, dim, nq);
  std::printf("%-14s %10s %10s %10s %9s\n", "index", "add s", "q p50 ms", "q p99 ms", "recall@10");
  std::vector<std::vector<uint64_t>> ref;
  size_t pos = 0;
  while (pos <= types.size()) {
    size_t semi = types.find(';', pos);
    std::string spec = types.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    pos = semi == std::string::npos ? types.size() + 1 : semi + 1;
    if (spec.empty()) continue;
    if (spec == "faiss-Flat") {  // the baseline: FAISS's own IndexFlatIP::search, one query per call
      omp_set_num_threads(threads > 0 ? threads : omp_get_max_threads());
      faiss::IndexFlatIP flat(dim);
      auto t0 = Clock::now();
      flat.add(static_cast<faiss::Index::idx_t>(n), xb.data());
      const double add_s = std::chrono::duration<double>(Clock::now() - t0).count();
      std::vector<double> lat;
      std::vector<float> d(10);
      std::vector<faiss::Index::idx_t> l(10);
      size_t hit = 0, tot = 0;
      for (size_t q = 0; q < nq; ++q) {
        auto q0 = Clock::now();
        flat.search(1, &xq[q * static_cast<size_t>(dim)], 10, d.data(), l.data());
        lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - q0).count());
        if (q < ref.size()) {
          std::set<uint64_t> s(ref[q].begin(), ref[q].end());
          for (auto x : l) hit += x >= 0 && s.count(static_cast<uint64_t>(x) + 1);
          tot += ref[q].size();
        }
      }
      const double recall = tot ? static_cast<double>(hit) / static_cast<double>(tot) : 1.0;
      std::printf("%-14s %10.2f %10.3f %10.3f %9.4f\n", spec.c_str(), add_s, pct(lat, 0.5), pct(lat, 0.99), recall);
      std::fflush(stdout);
      continue;
    }
    VectorIndexOptions o;
    o.spec = spec;
    o.dim = dim;
    o.omp_threads = threads;
    auto idx = VectorIndex::create(o);
    if (!idx.ok()) { std::fprintf(stderr, "%s\n", idx.status().to_string().c_str()); return; }
    auto t0 = Clock::now();
    if (!(*idx)->add(ids, xb).ok()) return;
    double add_s = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> lat;
    std::vector<std::vector<uint64_t>> got;
    for (size_t q = 0; q < nq; ++q) {
      auto q0 = Clock::now();
      auto r = (*idx)->search(std::span<const float>(&xq[q * static_cast<size_t>(dim)], static_cast<size_t>(dim)), 10);
      lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - q0).count());
      std::vector<uint64_t> v;
      for (const auto& nb : (*r)[0]) v.push_back(nb.id);
      got.push_back(std::move(v));
    }
    double recall = 1.0;
    if (spec == "Flat") ref = got;
    else if (!ref.empty()) {
      size_t hit = 0, tot = 0;
      for (size_t q = 0; q < nq; ++q) {
        std::set<uint64_t> s(ref[q].begin(), ref[q].end());
        for (uint64_t id : got[q]) hit += s.count(id);
        tot += ref[q].size();
      }
      recall = static_cast<double>(hit) / static_cast<double>(tot);
    }
    std::printf("%-14s %10.2f %10.3f %10.3f %9.4f\n", spec.c_str(), add_s, pct(lat, 0.5), pct(lat, 0.99), recall);
    std::fflush(stdout);
  }
}

// Owner of each id (by id): 0 shared, 1..T tenants. The filter ragd's Corpus uses has this shape.
class OwnerFilter final : public IdFilter {
 public:
  OwnerFilter(const std::vector<uint8_t>& owners, uint8_t tenant) : owners_(owners), tenant_(tenant) {}
  bool allowed(uint64_t id) const override { return id < owners_.size() && (owners_[id] == 0 || owners_[id] == tenant_); }

 private:
  const std::vector<uint8_t>& owners_;
  uint8_t tenant_;
};

struct Lat {
  std::vector<double> ms;
  std::vector<std::vector<uint64_t>> ids;
};

double recall_vs(const std::vector<std::vector<uint64_t>>& got, const std::vector<std::vector<uint64_t>>& ref) {
  size_t hit = 0, tot = 0;
  for (size_t q = 0; q < got.size() && q < ref.size(); ++q) {
    std::set<uint64_t> s(ref[q].begin(), ref[q].end());
    for (uint64_t id : got[q]) hit += s.count(id);
    tot += ref[q].size();
  }
  return tot ? static_cast<double>(hit) / static_cast<double>(tot) : 0;
}

// Tenant isolation at the vector level: no filter vs search-time filter vs per-tenant partitions.
void tenant_section(size_t n, int dim, size_t nq, int tenants, const std::string& types, int threads) {
  std::vector<float> all = clustered(n + nq, dim, 1000, 99);
  const size_t d = static_cast<size_t>(dim);
  std::vector<uint8_t> owner(n + 1, 255);
  std::vector<std::vector<uint64_t>> part_ids(static_cast<size_t>(tenants) + 1);
  std::vector<std::vector<float>> part_x(static_cast<size_t>(tenants) + 1);
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = i + 1;
    const uint8_t o = static_cast<uint8_t>((i + 1) % static_cast<size_t>(tenants + 1));
    owner[i + 1] = o;
    part_ids[o].push_back(i + 1);
    part_x[o].insert(part_x[o].end(), all.begin() + static_cast<long>(i * d), all.begin() + static_cast<long>((i + 1) * d));
  }
  std::vector<float> xb(all.begin(), all.begin() + static_cast<long>(n * d));
  const float* xq = all.data() + n * d;
  auto tenant_of = [&](size_t q) { return static_cast<uint8_t>(1 + q % static_cast<size_t>(tenants)); };
  std::printf("\ntenants: %d tenants + shared over %zu vectors (dim %d, %zu queries, k 10); a tenant sees %.1f%%\n",
              tenants, n, dim, nq, 100.0 * 2.0 / (tenants + 1));
  std::printf("%-14s %-12s %10s %10s %10s %9s\n", "index", "isolation", "build s", "q p50 ms", "q p99 ms", "recall@10");
  std::vector<std::vector<uint64_t>> exact;  // filtered Flat: the reference
  auto opts_for = [&](const std::string& spec) {
    VectorIndexOptions o;
    o.spec = spec;
    o.dim = dim;
    o.omp_threads = threads;
    return o;
  };
  size_t pos = 0;
  while (pos <= types.size()) {
    size_t semi = types.find(';', pos);
    std::string spec = types.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    pos = semi == std::string::npos ? types.size() + 1 : semi + 1;
    if (spec.empty()) continue;
    // One index over everything: unfiltered and filtered searches.
    auto idx = VectorIndex::create(opts_for(spec));
    if (!idx.ok()) { std::fprintf(stderr, "%s\n", idx.status().to_string().c_str()); return; }
    auto t0 = Clock::now();
    if (!(*idx)->add(ids, xb).ok()) return;
    double build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    auto run = [&](const std::function<std::vector<uint64_t>(size_t)>& one) {
      Lat l;
      for (size_t q = 0; q < nq; ++q) {
        auto q0 = Clock::now();
        l.ids.push_back(one(q));
        l.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - q0).count());
      }
      return l;
    };
    auto to_ids = [](const std::vector<Neighbor>& nb) {
      std::vector<uint64_t> v;
      for (const auto& x : nb) v.push_back(x.id);
      return v;
    };
    Lat none = run([&](size_t q) { return to_ids((*(*idx)->search(std::span<const float>(xq + q * d, d), 10))[0]); });
    Lat filt = run([&](size_t q) {
      OwnerFilter f(owner, tenant_of(q));
      SearchParams p;
      p.filter = &f;
      return to_ids((*(*idx)->search(std::span<const float>(xq + q * d, d), 10, p))[0]);
    });
    if (spec == "Flat") exact = filt.ids;
    // Per-tenant partitions: the tenant's index and the shared one, merged.
    std::vector<std::unique_ptr<VectorIndex>> parts;
    t0 = Clock::now();
    for (size_t t = 0; t < part_ids.size(); ++t) {
      auto p = VectorIndex::create(opts_for(spec));
      if (!p.ok() || !(*p)->add(part_ids[t], part_x[t]).ok()) return;
      parts.push_back(std::move(p).value());
    }
    double part_build_s = std::chrono::duration<double>(Clock::now() - t0).count();
    size_t untrained = 0;
    for (const auto& p : parts) untrained += !p->trained();
    Lat part = run([&](size_t q) {
      std::span<const float> one(xq + q * d, d);
      auto a = (*parts[tenant_of(q)]->search(one, 10))[0];
      auto b = (*parts[0]->search(one, 10))[0];
      a.insert(a.end(), b.begin(), b.end());
      std::sort(a.begin(), a.end(), [](const Neighbor& x, const Neighbor& y) { return x.score > y.score; });
      if (a.size() > 10) a.resize(10);
      return to_ids(a);
    });
    auto row = [&](const char* iso, double bs, const Lat& l, bool isolated) {
      std::string r = isolated ? std::to_string(recall_vs(l.ids, exact)).substr(0, 6) : "(leaks)";
      std::printf("%-14s %-12s %10.2f %10.3f %10.3f %9s\n", spec.c_str(), iso, bs, pct(l.ms, 0.5), pct(l.ms, 0.99),
                  r.c_str());
    };
    row("none", build_s, none, false);
    row("filter", build_s, filt, true);
    row("partitions", part_build_s, part, true);
    if (untrained) std::printf("  (%zu of %zu partitions below the IVF training threshold: searched exactly)\n", untrained, parts.size());
    std::fflush(stdout);
  }
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

// The process's resident set (VmRSS), MB; 0 when /proc is not there.
double resident_mb() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  double kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmRSS:", 6) == 0) kb = std::atof(line + 6);
  std::fclose(f);
  return kb / 1024.0;
}

int main(int argc, char** argv) {
  size_t target_chunks = 100000, nq = 1000, vectors = 100000;
  int chunk_tokens = 64, threads = 1, vdim = 128;
  std::string types = "Flat;faiss-Flat;IVF1024,Flat;HNSW32", tokenizer_path, dir = "/tmp/ragd-retrieval-bench";
  int tenants = 0;
  std::string tenant_types = "Flat;IVF1024,Flat;HNSW32";
  RetrievalMode mode = RetrievalMode::kDense;
  ragd::bench::BenchArgs args("bench_retrieval");
  args.opt("chunks", &target_chunks).opt("chunk-tokens", &chunk_tokens).opt("queries", &nq).opt("types", &types);
  args.opt("tokenizer", &tokenizer_path).opt("dir", &dir).opt("threads", &threads).opt("vectors", &vectors);
  args.opt("vector-dim", &vdim).opt("tenants", &tenants).opt("tenant-types", &tenant_types);
  args.custom("mode", "dense", [&mode](const std::string& v) {
    auto m = parse_enum<RetrievalMode>(v);
    if (!m.ok() || *m == RetrievalMode::kAuto) return std::string("dense, lexical or hybrid");
    mode = *m;
    return std::string();
  });
  if (!args.parse(argc, argv)) return 2;
  if (tenants < 0 || tenants > 200) { std::fprintf(stderr, "--tenants must be in [0, 200]\n"); return 2; }
  if (vectors > 0 && !types.empty()) vector_section(vectors, vdim, nq, types, threads);
  if (vectors > 0 && tenants > 0) tenant_section(vectors, vdim, nq, tenants, tenant_types, threads);
  if (target_chunks == 0) return 0;
  std::shared_ptr<const engine::Tokenizer> tok;
  if (!tokenizer_path.empty()) {
    auto t = engine::Tokenizer::from_file(tokenizer_path);
    if (!t.ok()) { std::fprintf(stderr, "%s\n", t.status().to_string().c_str()); return 1; }
    tok = std::move(t).value();
  } else {
    tok = std::make_shared<WordTokenizer>();
  }
  // Documents: ~4 chunks each at 64 tokens; enough of them to pass target_chunks.
  std::mt19937_64 rng(12345);
  auto vocab = vocabulary(20000, rng);
  std::vector<Document> docs;
  size_t est_tokens = 0;
  while (est_tokens < target_chunks * static_cast<size_t>(chunk_tokens) * 92 / 100) {
    size_t i = docs.size();
    Document d;
    d.id = "bench-" + std::to_string(i);
    if (tenants > 0 && i % static_cast<size_t>(tenants + 1) != 0) d.tenant = "t" + std::to_string(i % static_cast<size_t>(tenants + 1));
    size_t topic = i % 400;
    int paras = 2 + static_cast<int>(rng() % 4);
    for (int p = 0; p < paras; ++p) d.text += paragraph(rng, vocab, topic);
    est_tokens += tok->encode(d.text).size();
    docs.push_back(std::move(d));
  }
  // Queries: two sentences of random documents (scoped to that document's tenant, if any).
  std::vector<std::string> queries, scopes;
  for (size_t q = 0; q < nq; ++q) {
    const Document& qd = docs[rng() % docs.size()];
    scopes.push_back(qd.tenant.empty() ? "t1" : qd.tenant);
    const std::string& t = qd.text;
    size_t a = t.find(". ", rng() % (t.size() / 2));
    size_t b = a == std::string::npos ? std::string::npos : t.find(". ", a + 2);
    size_t c = b == std::string::npos ? std::string::npos : t.find(". ", b + 2);
    queries.push_back(c == std::string::npos ? t.substr(0, 160) : t.substr(a + 2, c - a - 2));
  }
  uint64_t text_bytes = 0;
  for (const auto& d : docs) text_bytes += d.text.size();
  std::printf("corpus: %zu documents, %.1f MB of text, chunk_tokens %d, %zu queries\n", docs.size(),
              static_cast<double>(text_bytes) / 1e6, chunk_tokens, nq);
  std::printf("queries: %s search\n", std::string(enum_name(mode)).c_str());
  std::printf("%-16s %9s %10s %11s %10s %10s %10s %9s %8s %8s\n", "index", "chunks", "ingest MB/s", "chunks/s", "q p50 ms",
              "q p99 ms", "q mean ms", "recall@10", "disk MB", "RSS MB");
  std::map<std::string, std::vector<std::vector<uint64_t>>> results;
  size_t pos = 0;
  while (pos <= types.size()) {
    size_t semi = types.find(';', pos);
    std::string spec = types.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    pos = semi == std::string::npos ? types.size() + 1 : semi + 1;
    if (spec.empty() || spec == "faiss-Flat") continue;  // a bare-index baseline only
    const std::string row = spec;
    // Suffixes: "/nolexical" (no lexical index), "/termvec" (the shipped term vectors instead of
    // the hashing embedder: default_termvec_dir()).
    auto take_suffix = [&spec](const std::string& suffix) {
      const bool has = spec.size() > suffix.size() && spec.ends_with(suffix);
      if (has) spec.resize(spec.size() - suffix.size());
      return has;
    };
    bool no_lexical = false, termvec = false;
    for (bool more = true; more;) {
      more = false;
      if (take_suffix("/nolexical")) more = no_lexical = true;
      if (take_suffix("/termvec")) more = termvec = true;
    }
    if (no_lexical && mode != RetrievalMode::kDense) {
      std::fprintf(stderr, "%s: a corpus without a lexical index answers only dense searches\n", row.c_str());
      return 2;
    }
    std::string d = dir + "/" + spec + (no_lexical ? "-nolexical" : "") + (termvec ? "-termvec" : "");
    std::filesystem::remove_all(d);
    CorpusOptions o;
    if (termvec) {
      o.embedder.name = "termvec";
      o.embedder.model_dir = default_termvec_dir();
      if (o.embedder.model_dir.empty()) {
        std::fprintf(stderr, "%s: no term vectors (models/ragd-termvec or $RAGD_TERMVEC_DIR)\n", row.c_str());
        return 2;
      }
    }
    o.chunker.chunk_tokens = chunk_tokens;
    o.index_spec = spec;
    o.lexical_index = !no_lexical;
    // By default the index types are compared by their vector searches (a corpus's auto mode
    // would search the lexical index with the hashing embedder).
    o.mode = mode;
    o.index.omp_threads = threads;
    o.index_save_every_chunks = 1ull << 40;  // one save at the end, timed with the ingest
    o.index_save_interval_s = 1e9;
    auto c = Corpus::open(d, o, tok);
    if (!c.ok()) { std::fprintf(stderr, "%s\n", c.status().to_string().c_str()); return 1; }
    auto t0 = Clock::now();
    const size_t batch = 256;
    for (size_t b = 0; b < docs.size(); b += batch) {
      auto s = (*c)->ingest(std::span<const Document>(docs.data() + b, std::min(batch, docs.size() - b)));
      if (!s.ok()) { std::fprintf(stderr, "%s\n", s.status().to_string().c_str()); return 1; }
    }
    if (auto st = (*c)->save_index(); !st.ok()) { std::fprintf(stderr, "%s\n", st.to_string().c_str()); return 1; }
    double ingest_s = std::chrono::duration<double>(Clock::now() - t0).count();
    auto stats = (*c)->stats();
    std::vector<double> lat;
    std::vector<std::vector<uint64_t>> ids;
    for (const auto& q : queries) {
      auto q0 = Clock::now();
      auto hits = (*c)->search(q, 10, ReadScope::everything());
      lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - q0).count());
      if (!hits.ok()) { std::fprintf(stderr, "%s\n", hits.status().to_string().c_str()); return 1; }
      std::vector<uint64_t> v;
      for (const auto& h : *hits) v.push_back(h.chunk.id);
      ids.push_back(std::move(v));
    }
    double recall = 1.0;
    if (results.count("Flat") && row != "Flat") {
      size_t hit = 0, tot = 0;
      const auto& ref = results["Flat"];
      for (size_t q = 0; q < ids.size(); ++q) {
        std::set<uint64_t> r(ref[q].begin(), ref[q].end());
        for (uint64_t id : ids[q]) hit += r.count(id);
        tot += ref[q].size();
      }
      recall = tot ? static_cast<double>(hit) / static_cast<double>(tot) : 0;
    }
    std::vector<double> scoped_lat;
    if (tenants > 0) {
      for (size_t q = 0; q < queries.size(); ++q) {
        auto q0 = Clock::now();
        auto hits = (*c)->search(queries[q], 10, ReadScope::tenant(scopes[q]));
        scoped_lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - q0).count());
        if (!hits.ok()) { std::fprintf(stderr, "%s\n", hits.status().to_string().c_str()); return 1; }
        for (const auto& h : *hits)
          if (!h.tenant.empty() && h.tenant != scopes[q]) { std::fprintf(stderr, "isolation broken\n"); return 1; }
      }
    }
    double mean = 0;
    for (double l : lat) mean += l;
    mean /= static_cast<double>(lat.size());
    uintmax_t disk = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(d))
      if (e.is_regular_file()) disk += e.file_size();
    std::printf("%-16s %9llu %10.2f %11.0f %10.3f %10.3f %10.3f %9s %8.1f %8.0f\n", row.c_str(),
                static_cast<unsigned long long>(stats.chunks), static_cast<double>(text_bytes) / 1e6 / ingest_s,
                static_cast<double>(stats.chunks) / ingest_s, pct(lat, 0.5), pct(lat, 0.99), mean,
                row == "Flat" ? "(ref)" : std::to_string(recall).substr(0, 6).c_str(), static_cast<double>(disk) / 1e6,
                resident_mb());
    if (tenants > 0)
      std::printf("%-16s scoped to one of %d tenants: q p50 %.3f ms, q p99 %.3f ms\n", row.c_str(), tenants,
                  pct(scoped_lat, 0.5), pct(scoped_lat, 0.99));
    std::fflush(stdout);
    results[row] = std::move(ids);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
