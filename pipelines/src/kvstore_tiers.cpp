#include "kvstore_tiers.h"

#include <filesystem>

#include "ragd/common/log.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::pipelines {

namespace {

class KvStoreTiers final : public LowerTiers {
 public:
  explicit KvStoreTiers(std::unique_ptr<kvstore::KvStore> s) : store_(std::move(s)) {}
  ~KvStoreTiers() override { store_->close(); }

  int match(PathSegments path) override {
    const auto docs = doc_keys(path);
    return static_cast<int>(store_->lookup(docs, {}, /*pin=*/false).nodes.size());
  }

  std::vector<LoadedNode> load(PathSegments path) override {
    const auto docs = doc_keys(path);
    kvstore::LookupResult hit = store_->lookup(docs, {}, /*pin=*/true);
    std::vector<LoadedNode> out;
    if (hit.nodes.empty()) return out;
    std::shared_ptr<kvstore::LoadHandle> h = store_->load(hit.nodes);
    h->wait();
    const size_t ok = h->prefix_ok();
    for (size_t i = 0; i < ok; ++i) {
      kvstore::SegmentRef seg = h->segment(i);
      if (!seg) break;
      LoadedNode n;
      n.tier = h->source(i) == kvstore::Tier::kSsd ? TierHit::kSsd : TierHit::kDram;
      n.num_tokens = seg->num_tokens();
      n.first_position = seg->header().first_position;
      n.k = seg->k_all();
      n.v = seg->v_all();
      n.keep = seg;
      out.push_back(std::move(n));
    }
    return out;
  }

  void insert(PathSegments path, int depth, int first_position, int num_tokens, const float* k,
              const float* v) override {
    const auto docs = doc_keys(path.subspan(0, depth + 1));
    kvstore::KvData kv;
    kv.num_tokens = num_tokens;
    kv.first_position = first_position;
    kv.k = k;
    kv.v = v;
    auto r = store_->insert(std::span<const Hash128>(docs.data(), depth), docs[depth], kv);
    if (!r.ok()) log::pipelines()->warn("kvstore insert failed: {}", r.status().to_string());
  }

  std::string stats_json() const override { return store_->stats_json(); }
  void flush() override {
    Status st = store_->flush();
    if (!st.ok()) log::pipelines()->warn("kvstore flush failed: {}", st.to_string());
  }

 private:
  static std::vector<Hash128> doc_keys(PathSegments path) {
    std::vector<Hash128> v;
    v.reserve(path.size());
    for (const auto& s : path) v.push_back(kvstore::doc_key(s));
    return v;
  }
  std::unique_ptr<kvstore::KvStore> store_;
};


}  // namespace

Result<std::unique_ptr<LowerTiers>> open_kvstore_tiers(const RuntimeOptions& opts, engine::Model& model) {
  kvstore::Options o;
  o.hbm_bytes = 0;  // the engine pool is the HBM tier
  o.dram_bytes = opts.dram_cache_bytes;
  o.ssd_bytes = opts.ssd_cache_bytes;
  if (opts.ssd_cache_bytes > 0) o.ssd_dir = (std::filesystem::path(opts.data_dir) / "kvcache").string();
  o.eviction = opts.eviction;
  const kvstore::KvFormat fmt = kvstore::KvFormat::from_layout(model.kv_pool().layout(), model.fingerprint());
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<kvstore::KvStore> s, kvstore::KvStore::open(o, fmt));
  return std::unique_ptr<LowerTiers>(new KvStoreTiers(std::move(s)));
}

}  // namespace ragd::pipelines
