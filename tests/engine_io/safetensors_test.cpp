// Safetensors: conversions against a double-precision reference, write->read round trips (single
// and sharded), and one test per malformed-file case.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "ragd/engine/safetensors.h"

namespace fs = std::filesystem;
using namespace ragd::engine;
using ::testing::HasSubstr;

namespace {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = fs::temp_directory_path() / ("ragd_st_" + std::to_string(rd()) + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

// Nearest representable value in a float format with `mant` mantissa bits and minimum normal
// exponent emin (ties to even), computed in double: the reference for f16/bf16 rounding.
double round_ref(double x, int mant, int emin, double maxv) {
  if (x == 0) return 0;
  int e;
  std::frexp(std::fabs(x), &e);  // |x| in [2^(e-1), 2^e)
  int exp = std::max(e - 1, emin);
  double ulp = std::ldexp(1.0, exp - mant);
  double q = std::nearbyint(x / ulp) * ulp;  // nearbyint rounds ties to even in the default mode
  if (std::fabs(q) > maxv) return std::copysign(INFINITY, x);
  return q;
}

OwnedTensor make_tensor(DType dt, std::vector<int64_t> shape, uint64_t seed) {
  OwnedTensor t;
  t.dtype = dt;
  t.shape = shape;
  size_t n = 1;
  for (auto d : shape) n *= d;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> f(n);
  for (auto& v : f) v = nd(rng);
  t.bytes.resize(n * dtype_size(dt));
  convert_from_f32(f.data(), n, dt, t.bytes.data());
  return t;
}

void write_raw(const std::string& path, const std::string& header, size_t data_bytes, int64_t declared_len = -1) {
  std::ofstream o(path, std::ios::binary);
  uint64_t n = declared_len >= 0 ? static_cast<uint64_t>(declared_len) : header.size();
  for (int i = 0; i < 8; ++i) o.put(static_cast<char>(n >> (8 * i)));
  o << header;
  for (size_t i = 0; i < data_bytes; ++i) o.put(static_cast<char>(i * 7));
}

std::string open_err(const std::string& path) {
  auto r = WeightStore::open_file(path);
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

}  // namespace

TEST(DTypeConversion, F16MatchesDoubleReference) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-27, 17);
  for (int i = 0; i < 200000; ++i) {
    float x = static_cast<float>((rng() & 1 ? -1 : 1) * std::ldexp(mant(rng), ex(rng)));
    double ref = round_ref(x, 10, -14, 65504.0);
    float got = f16_to_f32(f32_to_f16(x));
    ASSERT_EQ(static_cast<double>(got), ref) << "x=" << x;
  }
  // Exact ties round to even.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);                    // 1 + half ulp -> 1
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);                // -> up to even
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);                                         // rounds to inf
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
}

TEST(DTypeConversion, BF16MatchesDoubleReference) {
  std::mt19937_64 rng(8);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-120, 120);
  for (int i = 0; i < 200000; ++i) {
    float x = static_cast<float>((rng() & 1 ? -1 : 1) * std::ldexp(mant(rng), ex(rng)));
    double ref = round_ref(x, 7, -126, 3.3895313892515355e38);
    ASSERT_EQ(static_cast<double>(bf16_to_f32(f32_to_bf16(x))), ref) << "x=" << x;
  }
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(Safetensors, RoundTripAllDtypes) {
  TempDir d;
  std::map<std::string, OwnedTensor> ts;
  ts["a.weight"] = make_tensor(DType::kF32, {7, 33}, 1);
  ts["b.weight"] = make_tensor(DType::kF16, {129}, 2);
  ts["c.bias"] = make_tensor(DType::kBF16, {3, 5, 7}, 3);
  ts["empty"] = make_tensor(DType::kF32, {0, 4}, 4);
  ASSERT_TRUE(write_safetensors(d.file("model.safetensors"), ts, {{"format", "pt"}}).ok());
  auto r = WeightStore::open_dir(d.str());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  auto& ws = **r;
  EXPECT_EQ(ws.names(), (std::vector<std::string>{"a.weight", "b.weight", "c.bias", "empty"}));
  for (const auto& [name, t] : ts) {
    auto v = ws.get(name);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->dtype, t.dtype);
    EXPECT_EQ(v->shape, t.shape);
    ASSERT_EQ(v->nbytes, t.bytes.size());
    if (!t.bytes.empty()) EXPECT_EQ(0, std::memcmp(v->data, t.bytes.data(), t.bytes.size()));
    std::vector<float> f(v->numel());
    v->to_f32(f.data());
    for (int64_t i = 0; i < v->numel(); ++i) {
      uint16_t h;
      std::memcpy(&h, t.bytes.data() + 2 * i, t.dtype == DType::kF32 ? 0 : 2);
      float want = t.dtype == DType::kF32 ? reinterpret_cast<const float*>(t.bytes.data())[i]
                   : t.dtype == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
      ASSERT_EQ(f[i], want);
    }
  }
  EXPECT_FALSE(ws.get("missing").ok());
  EXPECT_THAT(ws.get("missing").status().message(), HasSubstr("'missing'"));
}

TEST(Safetensors, ShardedRoundTripAndChecksum) {
  TempDir single, sharded;
  std::vector<TensorSpec> specs;
  for (int i = 0; i < 9; ++i) specs.push_back({"layers." + std::to_string(i) + ".w", DType::kBF16, {33, 17 + i}});
  auto fill = [](const TensorSpec& s, std::span<uint8_t> dst) {
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<uint8_t>((i * 131 + s.name.size() * 7 + s.shape[1]) & 0xff);
    return ragd::Status::OK();
  };
  ASSERT_TRUE(write_safetensors_dir(single.str(), specs, fill).ok());
  ASSERT_TRUE(write_safetensors_dir(sharded.str(), specs, fill, 3000).ok());
  EXPECT_TRUE(fs::exists(sharded.file("model.safetensors.index.json")));
  EXPECT_FALSE(fs::exists(sharded.file("model.safetensors")));
  EXPECT_TRUE(fs::exists(sharded.file("model-00001-of-00006.safetensors")));
  auto a = WeightStore::open_dir(single.str());
  auto b = WeightStore::open_dir(sharded.str());
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ((*a)->names(), (*b)->names());
  EXPECT_EQ((*a)->checksum(), (*b)->checksum());
  auto v = (*b)->get("layers.8.w");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->shape, (std::vector<int64_t>{33, 25}));
  // Changing one byte changes the checksum.
  TempDir other;
  auto fill2 = [&](const TensorSpec& s, std::span<uint8_t> dst) {
    (void)fill(s, dst);
    if (s.name == "layers.4.w") dst[100] ^= 1;
    return ragd::Status::OK();
  };
  ASSERT_TRUE(write_safetensors_dir(other.str(), specs, fill2).ok());
  EXPECT_NE((*WeightStore::open_dir(other.str()))->checksum(), (*a)->checksum());
}

TEST(SafetensorsErrors, TruncatedHeaderLength) {
  TempDir d;
  std::ofstream(d.file("x.safetensors")) << "abc";
  EXPECT_THAT(open_err(d.file("x.safetensors")), HasSubstr("shorter than the 8-byte header length"));
}

TEST(SafetensorsErrors, HeaderLengthBeyondFile) {
  TempDir d;
  write_raw(d.file("x.safetensors"), "{}", 0, 1000);
  EXPECT_THAT(open_err(d.file("x.safetensors")), HasSubstr("header length 1000 exceeds the file size"));
}

TEST(SafetensorsErrors, BadJson) {
  TempDir d;
  write_raw(d.file("x.safetensors"), "{\"a\": {", 0);
  auto m = open_err(d.file("x.safetensors"));
  EXPECT_THAT(m, HasSubstr("x.safetensors"));
  EXPECT_THAT(m, HasSubstr("header is not valid JSON"));
}

TEST(SafetensorsErrors, UnknownDtype) {
  TempDir d;
  write_raw(d.file("x.safetensors"), R"({"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2);
  auto m = open_err(d.file("x.safetensors"));
  EXPECT_THAT(m, HasSubstr("tensor 'w'"));
  EXPECT_THAT(m, HasSubstr("dtype must be one of F32 | F16 | BF16; got 'Q4'"));
}

TEST(SafetensorsErrors, SizeNotShapeTimesDtype) {
  TempDir d;
  write_raw(d.file("x.safetensors"), R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", 20);
  EXPECT_THAT(open_err(d.file("x.safetensors")),
              HasSubstr("tensor 'w': shape x dtype is 24 bytes but data_offsets [0, 20] span 20 bytes"));
}

TEST(SafetensorsErrors, OffsetsOutOfRange) {
  TempDir d;
  write_raw(d.file("x.safetensors"), R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 16);
  EXPECT_THAT(open_err(d.file("x.safetensors")), HasSubstr("tensor 'w': data_offsets [8, 24] out of range"));
}

TEST(SafetensorsErrors, OverlappingTensors) {
  TempDir d;
  write_raw(d.file("x.safetensors"),
            R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
            16);
  EXPECT_THAT(open_err(d.file("x.safetensors")), HasSubstr("tensors 'a' and 'b' overlap"));
}

TEST(SafetensorsErrors, GapNotCovered) {
  TempDir d;
  write_raw(d.file("x.safetensors"),
            R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}})",
            20);
  EXPECT_THAT(open_err(d.file("x.safetensors")), HasSubstr("tensor 'b': bytes [8, 12) before it are not covered"));
}

TEST(SafetensorsErrors, TrailingBytes) {
  TempDir d;
  write_raw(d.file("x.safetensors"), R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 10);
  EXPECT_THAT(open_err(d.file("x.safetensors")), HasSubstr("6 trailing data bytes are not covered"));
}

TEST(SafetensorsErrors, DuplicateName) {
  TempDir d;
  write_raw(d.file("x.safetensors"),
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8);
  EXPECT_THAT(open_err(d.file("x.safetensors")), HasSubstr("tensor 'a': duplicate tensor name"));
}

TEST(SafetensorsErrors, IndexNamesMissingShard) {
  TempDir d;
  std::map<std::string, OwnedTensor> ts{{"a", make_tensor(DType::kF32, {3}, 1)}};
  ASSERT_TRUE(write_safetensors(d.file("model-00001-of-00002.safetensors"), ts).ok());
  std::ofstream(d.file("model.safetensors.index.json"))
      << R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})";
  auto r = WeightStore::open_dir(d.str());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("model.safetensors.index.json: tensor 'b' names shard 'model-00002-of-00002.safetensors', which does not exist"));
}

TEST(SafetensorsErrors, IndexTensorAbsentFromShard) {
  TempDir d;
  std::map<std::string, OwnedTensor> ts{{"a", make_tensor(DType::kF32, {3}, 1)}};
  ASSERT_TRUE(write_safetensors(d.file("s1.safetensors"), ts).ok());
  std::ofstream(d.file("model.safetensors.index.json")) << R"({"weight_map":{"a":"s1.safetensors","c":"s1.safetensors"}})";
  auto r = WeightStore::open_dir(d.str());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("tensor 'c' is not in its shard 's1.safetensors'"));
}

TEST(SafetensorsErrors, IndexBadJsonAndNoWeights) {
  TempDir d;
  std::ofstream(d.file("model.safetensors.index.json")) << "{\"weight_map\": [";
  auto r = WeightStore::open_dir(d.str());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("model.safetensors.index.json: invalid JSON"));
  TempDir empty;
  auto r2 = WeightStore::open_dir(empty.str());
  ASSERT_FALSE(r2.ok());
  EXPECT_THAT(r2.status().message(), HasSubstr("no model.safetensors"));
}
