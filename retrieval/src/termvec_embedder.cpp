// The term-vector embedder: one learned vector per stemmed term (tools/train/termvec_train.py),
// a text's vector the sum of its terms' rows weighted by 1 + ln tf, L2-normalised. Terms are
// generated exactly as the training script generates them: Xapian's TermGenerator with the
// English stemmer and STEM_ALL, no stopword list (the rows carry the learned term weights). With
// config.json's "oov_norm" > 0 a term outside the vocabulary adds a pseudo-random vector of that
// length (add_oov_row): the exact-match signal of a hashed feature, for names and identifiers the
// training text never held.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>
#include <xapian.h>

#include "ragd/common/hash.h"
#include "ragd/common/text_file.h"
#include "ragd/engine/safetensors.h"
#include "ragd/retrieval/embedder.h"

namespace ragd::retrieval {

namespace {

constexpr const char* kModelType = "ragd-termvec";
constexpr const char* kTermScheme = "xapian-english-stem-all";
constexpr const char* kTensor = "term_vectors";

// Thread-safety: immutable after construction; embed() is safe from any thread (each call makes
// its own term generator).
class TermVecEmbedder final : public Embedder {
 public:
  TermVecEmbedder(std::unordered_map<std::string, uint32_t> vocab, std::unique_ptr<engine::WeightStore> store,
                  engine::TensorView rows, int dim, double oov_norm, std::string identity)
      : vocab_(std::move(vocab)),
        store_(std::move(store)),
        rows_(std::move(rows)),
        row_bytes_(static_cast<size_t>(dim) * engine::dtype_size(rows_.dtype)),
        dim_(dim),
        oov_scale_(static_cast<float>(oov_norm / std::sqrt(static_cast<double>(dim)))),
        identity_(std::move(identity)) {}

  std::string_view name() const override { return "termvec"; }
  std::string identity() const override { return identity_; }
  int dim() const override { return dim_; }

  Status embed(std::span<const std::string_view> texts, std::vector<float>* out) const override {
    out->assign(texts.size() * static_cast<size_t>(dim_), 0.0f);
    // A term generator per call: Xapian's objects are not safe to share between threads.
    Xapian::Stem stem("english");
    Xapian::TermGenerator tg;
    tg.set_stemmer(stem);
    tg.set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
    std::vector<float> row(static_cast<size_t>(dim_));
    for (size_t i = 0; i < texts.size(); ++i) {
      float* v = out->data() + i * static_cast<size_t>(dim_);
      Xapian::Document doc;
      tg.set_document(doc);
      tg.index_text_without_positions(std::string(texts[i]));
      for (auto t = doc.termlist_begin(); t != doc.termlist_end(); ++t) {
        const std::string term = *t;
        const float w = 1.0f + std::log(static_cast<float>(t.get_wdf()));
        auto it = vocab_.find(term);
        if (it != vocab_.end()) {
          row_f32(it->second, row.data());
          for (int j = 0; j < dim_; ++j) v[j] += w * row[j];
        } else if (oov_scale_ > 0) {
          add_oov_row(term, w * oov_scale_, v);
        }
      }
      double n2 = 0;
      for (int j = 0; j < dim_; ++j) n2 += static_cast<double>(v[j]) * v[j];
      if (n2 > 0) {
        const float inv = static_cast<float>(1.0 / std::sqrt(n2));
        for (int j = 0; j < dim_; ++j) v[j] *= inv;
      }
    }
    return Status::OK();
  }

 private:
  // A term outside the vocabulary (a name, an identifier): a fixed pseudo-random sign vector of
  // its own, +-scale in every dimension, the signs drawn by splitmix64 from the term's xxh3-64. It
  // matches the same term elsewhere and is nearly orthogonal to everything else, as a hashed
  // feature is.
  void add_oov_row(const std::string& term, float scale, float* v) const {
    uint64_t x = xxh3_64(term.data(), term.size());
    uint64_t bits = 0;
    for (int j = 0; j < dim_; ++j) {
      if (j % 64 == 0) {
        x += 0x9E3779B97F4A7C15ULL;
        uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        bits = z ^ (z >> 31);
      }
      v[j] += ((bits >> (j % 64)) & 1) ? scale : -scale;
    }
  }

  // Row `term` of the table as f32.
  void row_f32(uint32_t term, float* dst) const {
    engine::dtype_to_f32(rows_.dtype, static_cast<const uint8_t*>(rows_.data) + static_cast<size_t>(term) * row_bytes_,
                         static_cast<size_t>(dim_), dst);
  }

  std::unordered_map<std::string, uint32_t> vocab_;
  // The table stays in the file's mapping, in its stored type ([vocab, dim] row-major), and is
  // converted a row at a time: no copy, and only the rows a process uses become resident (an idle
  // daemon held the whole table in f32 before, 57 MB).
  std::unique_ptr<engine::WeightStore> store_;
  engine::TensorView rows_;
  size_t row_bytes_;
  int dim_;
  float oov_scale_;  // oov_norm / sqrt(dim); 0 = terms outside the vocabulary are left out
  std::string identity_;
};

}  // namespace

bool is_termvec_model_dir(const std::string& dir) {
  auto cfg = read_text_file(dir + "/config.json");
  if (!cfg.ok()) return false;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::string_view type;
  return p.parse(*cfg).get(doc) == simdjson::SUCCESS && doc["model_type"].get_string().get(type) == simdjson::SUCCESS &&
         type == kModelType;
}

std::string default_termvec_dir() {
  if (const char* e = std::getenv("RAGD_TERMVEC_DIR"); e && *e) return is_termvec_model_dir(e) ? std::string(e) : "";
#ifdef RAGD_SHIPPED_TERMVEC_DIR
  if (is_termvec_model_dir(RAGD_SHIPPED_TERMVEC_DIR)) return RAGD_SHIPPED_TERMVEC_DIR;
#endif
  return "";
}

Result<std::unique_ptr<Embedder>> make_termvec_embedder(const std::string& dir) {
  if (dir.empty()) return Status::InvalidArgument("embedder 'termvec': no model directory given");
  const std::string cfg_path = dir + "/config.json";
  RAGD_ASSIGN_OR_RETURN(std::string cfg, read_text_file(cfg_path));
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (p.parse(cfg).get(doc) != simdjson::SUCCESS || !doc.is_object())
    return Status::InvalidArgument(cfg_path + ": not a JSON object");
  std::string_view type, terms;
  if (doc["model_type"].get_string().get(type) != simdjson::SUCCESS || type != kModelType)
    return Status::InvalidArgument(cfg_path + ": model_type is not \"" + kModelType + "\"");
  if (doc["terms"].get_string().get(terms) != simdjson::SUCCESS || terms != kTermScheme)
    return Status::InvalidArgument(cfg_path + ": terms must be \"" + kTermScheme + "\" (the only term scheme this build reads)");
  int64_t dim = 0, vocab_size = 0;
  if (doc["dim"].get_int64().get(dim) != simdjson::SUCCESS || dim < 1 || dim > 65536)
    return Status::InvalidArgument(cfg_path + ": dim must be an integer in [1, 65536]");
  if (doc["vocab_size"].get_int64().get(vocab_size) != simdjson::SUCCESS || vocab_size < 1 || vocab_size > (1ll << 31))
    return Status::InvalidArgument(cfg_path + ": vocab_size must be a positive integer");

  double oov_norm = 0;
  if (auto f = doc["oov_norm"]; f.error() != simdjson::NO_SUCH_FIELD) {
    if (f.get_double().get(oov_norm) != simdjson::SUCCESS || !(oov_norm >= 0) || oov_norm > 1e3)
      return Status::InvalidArgument(cfg_path + ": oov_norm must be a number in [0, 1000]");
  }

  const std::string vocab_path = dir + "/vocab.txt";
  RAGD_ASSIGN_OR_RETURN(std::string vocab_text, read_text_file(vocab_path));
  std::unordered_map<std::string, uint32_t> vocab;
  vocab.reserve(static_cast<size_t>(vocab_size));
  size_t line = 0, pos = 0;
  while (pos < vocab_text.size()) {
    size_t nl = vocab_text.find('\n', pos);
    if (nl == std::string::npos) nl = vocab_text.size();
    std::string term = vocab_text.substr(pos, nl - pos);
    ++line;
    if (term.empty()) return Status::InvalidArgument(fmt::format("{}:{}: empty term", vocab_path, line));
    if (!vocab.emplace(std::move(term), static_cast<uint32_t>(line - 1)).second)
      return Status::InvalidArgument(fmt::format("{}:{}: term repeated", vocab_path, line));
    pos = nl + 1;
  }
  if (static_cast<int64_t>(line) != vocab_size)
    return Status::InvalidArgument(fmt::format("{}: {} terms, config.json says vocab_size {}", vocab_path, line, vocab_size));

  const std::string weights_path = dir + "/model.safetensors";
  RAGD_ASSIGN_OR_RETURN(auto store, engine::WeightStore::open_file(weights_path));
  RAGD_ASSIGN_OR_RETURN(engine::TensorView t, store->get(kTensor));
  if (t.shape.size() != 2 || t.shape[0] != vocab_size || t.shape[1] != dim)
    return Status::InvalidArgument(fmt::format("{}: {} must be [{}, {}] (vocab_size, dim)", weights_path, kTensor,
                                               vocab_size, dim));
  {
    // Every value finite, checked a slice of rows at a time.
    const size_t row_bytes = static_cast<size_t>(dim) * engine::dtype_size(t.dtype);
    constexpr int64_t kSlice = 4096;
    std::vector<float> buf;
    for (int64_t r0 = 0; r0 < vocab_size; r0 += kSlice) {
      const int64_t n = std::min(kSlice, vocab_size - r0);
      buf.resize(static_cast<size_t>(n * dim));
      engine::dtype_to_f32(t.dtype, static_cast<const uint8_t*>(t.data) + static_cast<size_t>(r0) * row_bytes, buf.size(),
                           buf.data());
      for (float x : buf)
        if (!std::isfinite(x)) return Status::InvalidArgument(weights_path + ": " + kTensor + " holds a non-finite value");
    }
  }
  const Hash128 w = store->checksum();
  // The checks above read every page of the mapping; give them back (they are the file's: a row
  // read later comes in again).
  {
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t b = (reinterpret_cast<uintptr_t>(t.data) + page - 1) & ~(page - 1);
    const uintptr_t e = (reinterpret_cast<uintptr_t>(t.data) + t.nbytes) & ~(page - 1);
    if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  }
  // The fingerprint covers the rows, the vocabulary and the configuration (oov_norm changes vectors).
  const uint64_t v = xxh3_64(vocab_text.data(), vocab_text.size()) ^ (xxh3_64(cfg.data(), cfg.size()) * 0x9E3779B97F4A7C15ULL);
  std::string identity = fmt::format("termvec/{:016x}{:016x}/d={}", w.lo ^ v, w.hi, dim);
  return std::unique_ptr<Embedder>(new TermVecEmbedder(std::move(vocab), std::move(store), std::move(t),
                                                       static_cast<int>(dim), oov_norm, std::move(identity)));
}

}  // namespace ragd::retrieval
