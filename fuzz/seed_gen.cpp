// Writes the binary seed inputs with the project's own encoders, so that the fuzzers start from
// files the readers really accept:
//   <dir>/kv_segment/f32-2layers-3tokens.seg, f32-1layer-chunk.seg    (SegmentBuffer::build)
//   <dir>/kv_segment/header-only.bin                                  (encode_segment_header)
//   <dir>/safetensors/tiny-f32-bf16.safetensors, tiny-f16-meta.safetensors (write_safetensors)
// Usage: fuzz_seed_gen fuzz/corpus
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "ragd/engine/safetensors.h"
#include "ragd/kvstore/segment.h"

namespace {

namespace fs = std::filesystem;

bool write_bytes(const fs::path& p, std::span<const std::byte> b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return static_cast<bool>(f);
}

bool write_segment(const fs::path& p, int layers, int tokens, bool chunk) {
  using namespace ragd::kvstore;
  KvFormat fmt;
  fmt.model_fingerprint = {0x1234, 0x5678};
  fmt.num_layers = layers;
  fmt.num_kv_heads = 2;
  fmt.head_dim = 4;
  const size_t n = static_cast<size_t>(layers) * tokens * fmt.token_elems();
  std::vector<float> k(n), v(n);
  for (size_t i = 0; i < n; ++i) {
    k[i] = 0.25f * static_cast<float>(i % 13) - 1.0f;
    v[i] = 0.5f - 0.125f * static_cast<float>(i % 7);
  }
  SegmentIdentity id;
  id.key = {11, 12};
  id.parent_key = {21, 22};
  id.doc_key = {31, 32};
  id.depth = chunk ? 0 : 1;
  id.is_chunk = chunk;
  KvData kv;
  kv.num_tokens = tokens;
  kv.first_position = chunk ? 0 : 5;
  kv.k = k.data();
  kv.v = v.data();
  auto seg = SegmentBuffer::build(fmt, id, kv);
  if (!seg.ok()) {
    std::fprintf(stderr, "seed_gen: %s\n", seg.status().to_string().c_str());
    return false;
  }
  return write_bytes(p, (*seg)->bytes());
}

ragd::engine::OwnedTensor tensor(ragd::engine::DType dt, std::vector<int64_t> shape) {
  ragd::engine::OwnedTensor t;
  t.dtype = dt;
  t.shape = std::move(shape);
  size_t n = 1;
  for (auto d : t.shape) n *= static_cast<size_t>(d);
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = 0.1f * static_cast<float>(i) - 0.3f;
  t.bytes.resize(n * ragd::engine::dtype_size(dt));
  ragd::engine::convert_from_f32(f.data(), n, dt, t.bytes.data());
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir / "kv_segment");
  fs::create_directories(dir / "safetensors");
  bool ok = write_segment(dir / "kv_segment" / "f32-2layers-3tokens.seg", 2, 3, false);
  ok = write_segment(dir / "kv_segment" / "f32-1layer-chunk.seg", 1, 2, true) && ok;
  {
    ragd::kvstore::SegmentHeader h;
    h.num_layers = 2;
    h.num_kv_heads = 2;
    h.head_dim = 4;
    h.num_tokens = 1;
    h.payload_offset = ragd::kvstore::segment_header_size(2);
    h.payload_bytes = 2 * 2 * 2 * 4 * 4;
    h.layers.resize(2);
    for (uint32_t l = 0; l < 2; ++l) {
      h.layers[l].k_offset = h.payload_offset + l * h.layer_bytes();
      h.layers[l].v_offset = h.payload_offset + (2 + l) * h.layer_bytes();
    }
    auto bytes = ragd::kvstore::encode_segment_header(h);
    ok = write_bytes(dir / "kv_segment" / "header-only.bin", bytes) && ok;
  }
  using ragd::engine::DType;
  std::map<std::string, ragd::engine::OwnedTensor> a;
  a["model.embed_tokens.weight"] = tensor(DType::kF32, {4, 3});
  a["model.norm.weight"] = tensor(DType::kBF16, {3});
  ragd::Status st = ragd::engine::write_safetensors((dir / "safetensors" / "tiny-f32-bf16.safetensors").string(), a);
  std::map<std::string, ragd::engine::OwnedTensor> b;
  b["lm_head.weight"] = tensor(DType::kF16, {2, 2, 2});
  b["scalar"] = tensor(DType::kF32, {});
  ragd::Status st2 = ragd::engine::write_safetensors((dir / "safetensors" / "tiny-f16-meta.safetensors").string(), b,
                                                     {{"format", "pt"}});
  if (!st.ok() || !st2.ok()) {
    std::fprintf(stderr, "seed_gen: %s %s\n", st.to_string().c_str(), st2.to_string().c_str());
    return 1;
  }
  return ok ? 0 : 1;
}
