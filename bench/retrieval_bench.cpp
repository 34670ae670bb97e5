// Retrieval benchmark: ingest throughput (MB/s, chunks/s) through the full Corpus path (read ->
// chunk -> embed -> durable RocksDB batch -> FAISS add) and query latency p50/p99 (embed + search
// + chunk fetch) at ~100k chunks for each index type, plus recall@10 of each type against Flat on
// the same queries.
//
//   bench_retrieval [--chunks 100000] [--chunk-tokens 64] [--queries 1000]
//                   [--types "Flat;IVF1024,Flat;HNSW32"] [--tokenizer path/tokenizer.json]
//                   [--dir /tmp/x] [--threads 1] [--vectors 100000] [--vector-dim 128]
// --vectors N first measures the bare VectorIndex on N clustered synthetic vectors (recall@10 of
// each type against Flat at default search params, latency); --chunks 0 skips the corpus part.
//
// Without --tokenizer a built-in word tokenizer (one token per word / punctuation byte) chunks
// the text; with one, the engine's tokenizer does. Documents are synthetic: topic vocabularies of
// pseudo-words, seeded, so runs are repeatable.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/corpus.h"

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

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  size_t target_chunks = 100000, nq = 1000, vectors = 100000;
  int chunk_tokens = 64, threads = 1, vdim = 128;
  std::string types = "Flat;IVF1024,Flat;HNSW32", tokenizer_path, dir = "/tmp/ragd-retrieval-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--chunks") target_chunks = std::stoul(argv[i + 1]);
    else if (a == "--chunk-tokens") chunk_tokens = std::stoi(argv[i + 1]);
    else if (a == "--queries") nq = std::stoul(argv[i + 1]);
    else if (a == "--types") types = argv[i + 1];
    else if (a == "--tokenizer") tokenizer_path = argv[i + 1];
    else if (a == "--dir") dir = argv[i + 1];
    else if (a == "--threads") threads = std::stoi(argv[i + 1]);
    else if (a == "--vectors") vectors = std::stoul(argv[i + 1]);
    else if (a == "--vector-dim") vdim = std::stoi(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  if (vectors > 0) vector_section(vectors, vdim, nq, types, threads);
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
    size_t topic = i % 400;
    int paras = 2 + static_cast<int>(rng() % 4);
    for (int p = 0; p < paras; ++p) d.text += paragraph(rng, vocab, topic);
    est_tokens += tok->encode(d.text).size();
    docs.push_back(std::move(d));
  }
  // Queries: two sentences of random documents.
  std::vector<std::string> queries;
  for (size_t q = 0; q < nq; ++q) {
    const std::string& t = docs[rng() % docs.size()].text;
    size_t a = t.find(". ", rng() % (t.size() / 2));
    size_t b = a == std::string::npos ? std::string::npos : t.find(". ", a + 2);
    size_t c = b == std::string::npos ? std::string::npos : t.find(". ", b + 2);
    queries.push_back(c == std::string::npos ? t.substr(0, 160) : t.substr(a + 2, c - a - 2));
  }
  uint64_t text_bytes = 0;
  for (const auto& d : docs) text_bytes += d.text.size();
  std::printf("corpus: %zu documents, %.1f MB of text, chunk_tokens %d, %zu queries\n", docs.size(),
              static_cast<double>(text_bytes) / 1e6, chunk_tokens, nq);
  std::printf("%-14s %9s %10s %11s %10s %10s %10s %9s\n", "index", "chunks", "ingest MB/s", "chunks/s", "q p50 ms",
              "q p99 ms", "q mean ms", "recall@10");
  std::map<std::string, std::vector<std::vector<uint64_t>>> results;
  size_t pos = 0;
  while (pos <= types.size()) {
    size_t semi = types.find(';', pos);
    std::string spec = types.substr(pos, semi == std::string::npos ? std::string::npos : semi - pos);
    pos = semi == std::string::npos ? types.size() + 1 : semi + 1;
    if (spec.empty()) continue;
    std::string d = dir + "/" + spec;
    std::filesystem::remove_all(d);
    CorpusOptions o;
    o.chunker.chunk_tokens = chunk_tokens;
    o.index_spec = spec;
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
      auto hits = (*c)->search(q, 10);
      lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - q0).count());
      if (!hits.ok()) { std::fprintf(stderr, "%s\n", hits.status().to_string().c_str()); return 1; }
      std::vector<uint64_t> v;
      for (const auto& h : *hits) v.push_back(h.chunk.id);
      ids.push_back(std::move(v));
    }
    double recall = 1.0;
    if (results.count("Flat")) {
      size_t hit = 0, tot = 0;
      const auto& ref = results["Flat"];
      for (size_t q = 0; q < ids.size(); ++q) {
        std::set<uint64_t> r(ref[q].begin(), ref[q].end());
        for (uint64_t id : ids[q]) hit += r.count(id);
        tot += ref[q].size();
      }
      recall = tot ? static_cast<double>(hit) / static_cast<double>(tot) : 0;
    }
    double mean = 0;
    for (double l : lat) mean += l;
    mean /= static_cast<double>(lat.size());
    std::printf("%-14s %9llu %10.2f %11.0f %10.3f %10.3f %10.3f %9s\n", spec.c_str(),
                static_cast<unsigned long long>(stats.chunks), static_cast<double>(text_bytes) / 1e6 / ingest_s,
                static_cast<double>(stats.chunks) / ingest_s, pct(lat, 0.5), pct(lat, 0.99), mean,
                spec == "Flat" ? "(ref)" : std::to_string(recall).substr(0, 6).c_str());
    std::fflush(stdout);
    results[spec] = std::move(ids);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
