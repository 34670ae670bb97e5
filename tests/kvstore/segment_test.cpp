#include "ragd/kvstore/segment.h"

#include <cstring>

#include <gtest/gtest.h>

#include "kv_test_util.h"
#include "ragd/kernels/half.h"
#include "ragd/kvstore/eviction.h"
#include "ragd/kvstore/knowledge_tree.h"

namespace ragd::kvstore {
namespace {

using testing::make_kv;
using testing::test_format;

SegmentIdentity ident(uint64_t d) {
  SegmentIdentity id;
  id.doc_key = testing::dk(d);
  id.parent_key = {1, 2};
  id.key = child_key(id.parent_key, id.doc_key);
  id.depth = 3;
  return id;
}

TEST(Segment, RoundTripOddSizesMatchesSourceLayout) {
  for (int tokens : {7, 33, 129}) {
    const KvFormat f = test_format(3, 2, 5);
    auto kv = make_kv(f, tokens, tokens);
    auto seg = SegmentBuffer::build(f, ident(tokens), kv.data(/*first_position=*/41));
    ASSERT_TRUE(seg.ok()) << seg.status().to_string();
    const SegmentBuffer& s = **seg;
    EXPECT_EQ(s.num_tokens(), tokens);
    EXPECT_EQ(s.header().first_position, 41);
    EXPECT_TRUE(s.header().k_rotated);
    EXPECT_EQ(s.header().depth, 3u);
    EXPECT_EQ(s.header().payload_offset % 64, 0u);
    EXPECT_EQ(s.size(), s.header().payload_offset + f.bytes_per_token() * tokens);
    const size_t per_layer = static_cast<size_t>(tokens) * f.token_elems();
    // k_all / v_all are [layers][tokens, heads, dim]: element-for-element the caller's arrays.
    for (size_t i = 0; i < kv.k.size(); ++i) {
      ASSERT_EQ(s.k_all()[i], kv.k[i]) << i;
      ASSERT_EQ(s.v_all()[i], kv.v[i]) << i;
    }
    for (int l = 0; l < f.num_layers; ++l) {
      EXPECT_EQ(s.k(l), s.k_all() + l * per_layer);
      EXPECT_EQ(s.v(l), s.v_all() + l * per_layer);
    }
    EXPECT_TRUE(s.verify_all().ok());
    auto again = SegmentBuffer::parse(s.bytes(), true);
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ((*again)->header().key, s.header().key);
    EXPECT_EQ(std::memcmp((*again)->bytes().data(), s.bytes().data(), s.size()), 0);
  }
}

TEST(Segment, EveryLayerChecksumCatchesAFlippedByte) {
  const KvFormat f = test_format(4, 1, 3);
  auto kv = make_kv(f, 7, 9);
  auto seg = SegmentBuffer::build(f, ident(9), kv.data());
  ASSERT_TRUE(seg.ok());
  for (int l = 0; l < f.num_layers; ++l) {
    for (bool is_v : {false, true}) {
      std::vector<std::byte> bytes((*seg)->bytes().begin(), (*seg)->bytes().end());
      const size_t off = is_v ? (*seg)->header().layers[l].v_offset : (*seg)->header().layers[l].k_offset;
      bytes[off + 5] ^= std::byte{0x10};
      auto bad = SegmentBuffer::parse(bytes, /*verify_payload=*/true);
      ASSERT_FALSE(bad.ok());
      EXPECT_EQ(bad.status().code(), StatusCode::kCorruption);
      EXPECT_NE(bad.status().message().find("layer " + std::to_string(l) + (is_v ? " V" : " K")), std::string::npos)
          << bad.status().message();
      // The other layers still verify, so a consumer can tell which layer is bad.
      auto unchecked = SegmentBuffer::parse(bytes, false);
      ASSERT_TRUE(unchecked.ok());
      for (int o = 0; o < f.num_layers; ++o) EXPECT_EQ((*unchecked)->verify_layer(o).ok(), o != l);
    }
  }
}

TEST(Segment, HeaderCorruptionIsDetected) {
  const KvFormat f = test_format();
  auto seg = SegmentBuffer::build(f, ident(1), make_kv(f, 7, 1).data());
  ASSERT_TRUE(seg.ok());
  std::vector<std::byte> bytes((*seg)->bytes().begin(), (*seg)->bytes().end());
  bytes[50] ^= std::byte{1};  // token count
  auto r = decode_segment_header(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("header checksum"), std::string::npos) << r.status().message();
}

TEST(Segment, BadMagicIsNamed) {
  std::vector<std::byte> bytes(256, std::byte{7});
  auto r = decode_segment_header(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("magic"), std::string::npos);
}

TEST(Segment, TruncatedHeaderIsNamed) {
  std::vector<std::byte> bytes(20, std::byte{7});
  auto r = decode_segment_header(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
}

TEST(Segment, TruncatedPayloadIsNamed) {
  const KvFormat f = test_format();
  auto seg = SegmentBuffer::build(f, ident(1), make_kv(f, 7, 1).data());
  ASSERT_TRUE(seg.ok());
  auto r = SegmentBuffer::parse((*seg)->bytes().first((*seg)->size() - 4), true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("header says"), std::string::npos) << r.status().message();
}

TEST(Segment, FutureFormatVersionIsRejected) {
  const KvFormat f = test_format();
  auto seg = SegmentBuffer::build(f, ident(1), make_kv(f, 7, 1).data());
  ASSERT_TRUE(seg.ok());
  SegmentHeader h = (*seg)->header();
  h.format_version = 2;
  auto r = decode_segment_header(encode_segment_header(h));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("format version 2"), std::string::npos) << r.status().message();
}

// The dtype byte of the header (offset 32) holds the code the format defines: f32 = 0, bf16 = 2
// (1 was f16 and stays reserved), int8 = 3. Segments written before kernels and kvstore shared one
// KvDtype used exactly these codes for f32 and bf16, so they stay readable.
// segment_bytes (what the store accounts for a pool copy it has not built) is the size build gives.
TEST(Segment, SegmentBytesIsTheBuiltSize) {
  for (KvDtype dt : {KvDtype::kF32, KvDtype::kBF16}) {
    for (int layers : {1, 3}) {
      for (int tokens : {1, 7, 33, 129}) {
        KvFormat f = test_format(layers, 2, 5);
        f.dtype = dt;
        auto kv = make_kv(f, tokens, 9);
        auto s = SegmentBuffer::build(f, ident(9), kv.data());
        ASSERT_TRUE(s.ok()) << s.status().to_string();
        EXPECT_EQ(segment_bytes(f, tokens), (*s)->size()) << kv_dtype_name(dt) << " " << layers << " layers " << tokens;
      }
    }
  }
}

TEST(Segment, DtypeCodesAreTheFormats) {
  EXPECT_EQ(kernels::kv_dtype_code(KvDtype::kF32), 0);
  EXPECT_EQ(kernels::kv_dtype_code(KvDtype::kBF16), 2);
  EXPECT_EQ(kernels::kv_dtype_code(KvDtype::kInt8), 3);
  for (int c = 0; c < 256; ++c) {
    auto d = kernels::kv_dtype_from_code(static_cast<uint8_t>(c));
    EXPECT_EQ(d.has_value(), c == 0 || c == 2 || c == 3) << c;
    if (d) EXPECT_EQ(kernels::kv_dtype_code(*d), c);
  }
  for (KvDtype dt : {KvDtype::kF32, KvDtype::kBF16}) {
    KvFormat f = test_format();
    f.dtype = dt;
    auto seg = SegmentBuffer::build(f, ident(1), make_kv(f, 7, 1).data());
    ASSERT_TRUE(seg.ok()) << seg.status().to_string();
    EXPECT_EQ(static_cast<int>((*seg)->bytes()[32]), dt == KvDtype::kF32 ? 0 : 2);
    auto back = decode_segment_header((*seg)->bytes());
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->dtype, dt);
  }
  const KvFormat f = test_format();
  auto seg = SegmentBuffer::build(f, ident(1), make_kv(f, 7, 1).data());
  ASSERT_TRUE(seg.ok());
  SegmentHeader h = (*seg)->header();
  h.dtype = static_cast<KvDtype>(1);  // f16: reserved, never written
  auto r = decode_segment_header(encode_segment_header(h));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("unknown dtype code 1"), std::string::npos) << r.status().message();
}

TEST(Segment, OtherModelDtypeLayoutShapeRopeAreRejected) {
  const KvFormat f = test_format();
  auto seg = SegmentBuffer::build(f, ident(1), make_kv(f, 7, 1).data());
  ASSERT_TRUE(seg.ok());
  const SegmentHeader& h = (*seg)->header();
  EXPECT_TRUE(check_segment_format(h, f).ok());
  struct Case {
    const char* field;
    KvFormat fmt;
  };
  std::vector<Case> cases;
  KvFormat g = f;
  g.model_fingerprint.lo ^= 1;
  cases.push_back({"model fingerprint", g});
  g = f;
  g.dtype = KvDtype::kBF16;
  cases.push_back({"dtype", g});
  g = f;
  g.layout_version = 2;
  cases.push_back({"layout version", g});
  g = f;
  g.head_dim = 7;
  cases.push_back({"shape", g});
  g = f;
  g.k_rotated = false;
  cases.push_back({"RoPE", g});
  for (const Case& c : cases) {
    Status st = check_segment_format(h, c.fmt);
    ASSERT_FALSE(st.ok()) << c.field;
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
  }
}

// bf16 segments: every value rounded to nearest even once, half of f32's payload, read back by
// read_all; parse and the layer checksums work on them as on f32.
TEST(Segment, Bf16SegmentsRoundOnceAndReadBackWidened) {
  KvFormat f = test_format();
  f.dtype = KvDtype::kBF16;
  auto kv = make_kv(f, 9, 3);
  auto seg = SegmentBuffer::build(f, ident(5), kv.data());
  ASSERT_TRUE(seg.ok()) << seg.status().to_string();
  const SegmentHeader& h = (*seg)->header();
  EXPECT_EQ(h.dtype, KvDtype::kBF16);
  EXPECT_EQ(h.payload_bytes, f.bytes_per_token() * 9);
  KvFormat f32 = f;
  f32.dtype = KvDtype::kF32;
  EXPECT_EQ(2 * f.bytes_per_token(), f32.bytes_per_token());
  std::vector<float> k(kv.k.size()), v(kv.v.size());
  (*seg)->read_all(k.data(), v.data());
  int rounded = 0;
  for (size_t i = 0; i < k.size(); ++i) {
    ASSERT_EQ(k[i], kernels::bf16_to_f32(kernels::f32_to_bf16(kv.k[i]))) << i;
    ASSERT_EQ(v[i], kernels::bf16_to_f32(kernels::f32_to_bf16(kv.v[i]))) << i;
    rounded += k[i] != kv.k[i];
  }
  EXPECT_GT(rounded, 0);
  auto back = SegmentBuffer::parse((*seg)->bytes(), true);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_TRUE(check_segment_format((*back)->header(), f).ok());
  EXPECT_FALSE(check_segment_format((*back)->header(), f32).ok());
  std::vector<std::byte> bytes((*seg)->bytes().begin(), (*seg)->bytes().end());
  bytes[h.layers[1].v_offset + 3] ^= std::byte{0x10};
  auto bad = SegmentBuffer::parse(bytes, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 1 V"), std::string::npos) << bad.status().message();
}

TEST(Segment, BuildRejectsBadInput) {
  const KvFormat f = test_format();
  auto kv = make_kv(f, 7, 1);
  KvData d = kv.data();
  d.num_tokens = 0;
  auto r = SegmentBuffer::build(f, ident(1), d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_tokens"), std::string::npos);
  d = kv.data();
  d.k = nullptr;
  r = SegmentBuffer::build(f, ident(1), d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("null"), std::string::npos);
  d = kv.data(-3);
  r = SegmentBuffer::build(f, ident(1), d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("first_position"), std::string::npos);
  KvFormat g = f;
  g.dtype = KvDtype::kInt8;  // a pool type, not a segment format yet
  r = SegmentBuffer::build(g, ident(1), kv.data());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("int8"), std::string::npos);
  g = f;
  g.num_layers = 0;
  r = SegmentBuffer::build(g, ident(1), kv.data());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("num_layers"), std::string::npos);
}

TEST(Keys, DeterministicAcrossProcessesAndSensitiveToEveryInput) {
  const KvFormat f = test_format();
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6, 7};
  // Golden values: keys must not depend on the process (no seeded hashing), so they are fixed.
  EXPECT_EQ(doc_key(toks).to_hex(), "6e5448edd40781cf996e0d452960dce4");
  EXPECT_EQ(tree_scope_key(f, "").to_hex(), "7597f9342d47bb7823c35071fe5763af");
  const Hash128 d = doc_key(toks);
  const Hash128 root = tree_scope_key(f, "");
  EXPECT_NE(tree_scope_key(f, "tenant-a"), root);
  EXPECT_NE(chunk_scope_key(f, ""), root);
  KvFormat g = f;
  g.model_fingerprint.hi ^= 1;
  EXPECT_NE(tree_scope_key(g, ""), root);
  g = f;
  g.k_rotated = false;
  EXPECT_NE(tree_scope_key(g, ""), root);
  g = f;
  g.layout_version = 2;
  EXPECT_NE(tree_scope_key(g, ""), root);
  g = f;
  g.dtype = KvDtype::kBF16;
  EXPECT_NE(tree_scope_key(g, ""), root);
  // Prefix dependence: the same document under another parent is another key.
  const Hash128 a = child_key(root, d);
  EXPECT_NE(child_key(a, d), a);
  EXPECT_NE(child_key(child_key(root, doc_key(std::vector<int32_t>{9})), d), a);
  // Token order matters.
  EXPECT_NE(doc_key(std::vector<int32_t>{2, 1}), doc_key(std::vector<int32_t>{1, 2}));
}

TEST(CostModel, InterpolatesAgainstNaiveBilinear) {
  std::vector<int> gc = {0, 512, 2048};
  std::vector<int> gn = {64, 256, 1024};
  auto t = [](double c, double n) { return 1e-5 * n + 3e-9 * n * (c + n / 2); };
  std::vector<double> s;
  for (int c : gc)
    for (int n : gn) s.push_back(t(c, n));
  auto m = PrefillCostModel::from_grid(gc, gn, s);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  for (size_t i = 0; i < gc.size(); ++i)
    for (size_t j = 0; j < gn.size(); ++j) EXPECT_NEAR(m->seconds(gc[i], gn[j]), t(gc[i], gn[j]), 1e-15);
  // Inside a cell: naive bilinear interpolation in double precision.
  const double c = 1000, n = 333;
  const double tc = (c - 512) / (2048 - 512), tn = (n - 256) / (1024 - 256);
  const double a = t(512, 256) + (t(512, 1024) - t(512, 256)) * tn;
  const double b = t(2048, 256) + (t(2048, 1024) - t(2048, 256)) * tn;
  EXPECT_NEAR(m->seconds(c, n), a + (b - a) * tc, 1e-15);
  // Extrapolates in new tokens, clamps in cached tokens.
  EXPECT_GT(m->seconds(0, 4096), m->seconds(0, 1024));
  EXPECT_NEAR(m->seconds(1e6, 256), t(2048, 256), 1e-15);
  EXPECT_EQ(m->seconds(100, 0), 0.0);
}

TEST(CostModel, ProfileCallsMeasureOnTheGrid) {
  int calls = 0;
  auto m = PrefillCostModel::profile(
      [&](int c, int n) -> Result<double> {
        ++calls;
        return 1e-6 * (n + c);
      },
      {0, 100}, {10, 20, 30});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(calls, 6);
  EXPECT_TRUE(m->profiled());
  EXPECT_NEAR(m->seconds(100, 20), 1e-6 * 120, 1e-15);
  auto bad = PrefillCostModel::profile([](int, int) -> Result<double> { return Status::Internal("engine down"); }, {0, 1}, {1, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("engine down"), std::string::npos);
}

TEST(CostModel, RejectsBadGrids) {
  auto r = PrefillCostModel::from_grid({0}, {1, 2}, {1, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("at least 2"), std::string::npos);
  r = PrefillCostModel::from_grid({0, 0}, {1, 2}, {1, 1, 1, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("strictly increasing"), std::string::npos);
  r = PrefillCostModel::from_grid({0, 1}, {1, 2}, {1, 1, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("timings"), std::string::npos);
  r = PrefillCostModel::from_grid({0, 1}, {1, 2}, {1, 1, -1, 1});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not positive"), std::string::npos);
}

TEST(EvictionPolicyName, ParsesKnownAndNamesUnknown) {
  for (const char* n : {"pgdsf", "lru", "lfu", "gdsf"}) {
    auto p = parse_eviction_policy(n);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(eviction_policy_name(*p), n);
  }
  auto bad = parse_eviction_policy("fifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "eviction must be one of pgdsf | lru | lfu | gdsf; got 'fifo'");
  bad = parse_eviction_policy("clock");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'clock'"), std::string::npos);
  for (Tier t : enum_values<Tier>()) EXPECT_EQ(enum_from_name<Tier>(tier_name(t)), t);
}

}  // namespace
}  // namespace ragd::kvstore
