// KV spilled out of the pool (kv_spill.h), attended where it lives:
//   - KvSpill alone: attention over spilled keys (host memory, the SSD file, both; f32 / bf16 /
//     int8; one and several queries; queries that see all of it and queries inside it, masked by
//     position) against a naive double-precision softmax over the same stored keys;
//   - a corrupted byte of the file is reported as Corruption naming the layer; no room is a clear
//     ResourceExhausted;
//   - ShardedSequence with a pool too small for the sequence, on one worker and on two: the same
//     greedy tokens and logits (kLogitTol) as one worker with a pool that holds everything, the
//     spill taking KV during the prefill and during decode, in every tier.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <mutex>
#include <random>
#include <string>

#include "ragd/kernels/kv_dtype.h"
#include "ragd/seqparallel/kv_spill.h"
#include "ragd/seqparallel/sharded_sequence.h"
#include "ragd/seqparallel/thread_communicator.h"
#include "sp_fixture.h"

namespace ragd::seqparallel {
namespace {

using namespace testing;  // NOLINT

std::string temp_dir() {
  std::string t = (std::filesystem::temp_directory_path() / "ragd-spill-XXXXXX").string();
  EXPECT_NE(::mkdtemp(t.data()), nullptr);
  return t;
}

engine::KvLayout spill_layout(kernels::KvDtype dt) {
  engine::KvLayout l;
  l.num_layers = 3;
  l.num_kv_heads = 2;
  l.head_dim = 24;
  l.block_size = 7;
  l.dtype = dt;
  return l;
}

std::vector<float> rnd(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// Naive attention of one query row over keys [n, kv_heads, hd] (f32 values as stored), visible
// when pos[j] <= qp; head h reads kv head h / (nh / kvh).
void naive(const float* q, int nh, const std::vector<float>& k, const std::vector<float>& v,
           const std::vector<int32_t>& pos, int kvh, int hd, int32_t qp, float scale, float* out, float* lse) {
  for (int h = 0; h < nh; ++h) {
    const int g = h / (nh / kvh);
    double m = -INFINITY;
    std::vector<double> s(pos.size(), -INFINITY);
    for (size_t j = 0; j < pos.size(); ++j) {
      if (pos[j] > qp) continue;
      double d = 0;
      for (int x = 0; x < hd; ++x) d += double(q[h * hd + x]) * k[(j * kvh + g) * hd + x];
      s[j] = d * scale;
      m = std::max(m, s[j]);
    }
    double z = 0;
    std::vector<double> o(hd, 0.0);
    for (size_t j = 0; j < pos.size(); ++j) {
      if (s[j] == -INFINITY) continue;
      const double p = std::exp(s[j] - m);
      z += p;
      for (int x = 0; x < hd; ++x) o[x] += p * v[(j * kvh + g) * hd + x];
    }
    for (int x = 0; x < hd; ++x) out[h * hd + x] = z > 0 ? static_cast<float>(o[x] / z) : 0.0f;
    lse[h] = z > 0 ? static_cast<float>(m + std::log(z)) : -std::numeric_limits<float>::infinity();
  }
}

struct Tiers {
  const char* name;
  int64_t dram_bytes;  // per extent: whether the first extent fits host memory
  bool ssd;
};

// Three extents spilled from a table at positions 0, 3, 6, ... (so a query position can sit inside
// the spilled range), attended layer by layer twice (the read-ahead wraps from the last layer to the
// first), against the naive softmax over the same stored values.
TEST(KvSpill, AttendsOverSpilledKeysLikeANaiveSoftmax) {
  for (auto dt : {kernels::KvDtype::kF32, kernels::KvDtype::kBF16, kernels::KvDtype::kInt8}) {
    const engine::KvLayout L = spill_layout(dt);
    const int kvh = L.num_kv_heads, hd = L.head_dim, nh = 6;  // GQA 3
    const size_t token_bytes = L.token_bytes();
    for (const Tiers& tiers : {Tiers{"memory", int64_t{1} << 30, false}, Tiers{"ssd", 0, true},
                               Tiers{"memory+ssd", static_cast<int64_t>(token_bytes * 60), true}}) {
      const std::string dir = tiers.ssd ? temp_dir() : "";
      auto pool = std::move(engine::KvPool::create(L, 64).value());
      SpillOptions o;
      o.dram_bytes = tiers.dram_bytes;
      o.dir = dir;
      auto spill = std::move(KvSpill::create(L, o).value());
      // Per layer: the stored values (read back as f32) of every spilled key, and their positions.
      std::vector<std::vector<float>> ks(L.num_layers), vs(L.num_layers);
      std::vector<int32_t> pos;
      int32_t next_pos = 2;  // a query at position 0 sees none of them
      uint32_t seed = 11;
      for (int n : {53, 7, 38}) {  // odd sizes; the first extent fits 60 tokens of host memory, the rest not
        engine::BlockTable t;
        const size_t per = static_cast<size_t>(n) * L.token_floats();
        std::vector<int32_t> slots(n), ps(n);
        for (int i = 0; i < n; ++i) {
          slots[i] = i;
          ps[i] = next_pos;
          next_pos += 3;
        }
        ASSERT_TRUE(t.reserve_slots(*pool, slots));
        t.commit_slots(slots, ps);
        for (int l = 0; l < L.num_layers; ++l) {
          auto k = rnd(per, seed++), v = rnd(per, seed++);
          t.write(*pool, l, 0, n, k.data(), v.data());
          std::vector<float> kb(per), vb(per);
          t.read(*pool, l, 0, n, kb.data(), vb.data());  // as stored (bf16 / int8 rounding)
          ks[l].insert(ks[l].end(), kb.begin(), kb.end());
          vs[l].insert(vs[l].end(), vb.begin(), vb.end());
        }
        pos.insert(pos.end(), ps.begin(), ps.end());
        ASSERT_TRUE(spill->append(*pool, t, n).ok());
        t.release(*pool);
      }
      const SpillStats st0 = spill->stats();
      EXPECT_EQ(st0.dram_tokens + st0.ssd_tokens, 98);
      EXPECT_EQ(st0.extents, 3);
      if (tiers.ssd) EXPECT_GT(st0.ssd_tokens, 0) << tiers.name;
      if (tiers.dram_bytes > 0) EXPECT_GT(st0.dram_tokens, 0) << tiers.name;
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      for (int round = 0; round < 2; ++round) {
        for (int l = 0; l < L.num_layers; ++l) {
          // Queries: one past every key, one inside the first extent, one inside the last, one
          // before every key (sees nothing: o = 0, lse = -inf).
          for (int nq : {1, 4}) {
            std::vector<int32_t> qp = {next_pos + 5, 40, 250, 0};
            if (nq == 1) qp = {round == 0 ? next_pos : 100};
            qp.resize(nq);
            auto q = rnd(static_cast<size_t>(nq) * nh * hd, 1000 + l + 10 * nq + round);
            std::vector<float> out(q.size(), 0.0f), lse(static_cast<size_t>(nq) * nh, -INFINITY);
            ASSERT_TRUE(spill->attend(l, q.data(), nq, nh, qp.data(), scale, out.data(), lse.data()).ok());
            for (int i = 0; i < nq; ++i) {
              std::vector<float> ro(nh * hd), rl(nh);
              naive(q.data() + i * nh * hd, nh, ks[l], vs[l], pos, kvh, hd, qp[i], scale, ro.data(), rl.data());
              for (int x = 0; x < nh * hd; ++x)
                ASSERT_NEAR(out[i * nh * hd + x], ro[x], 1e-4) << tiers.name << " " << kernels::kv_dtype_name(dt)
                                                                << " layer " << l << " query " << i;
              for (int h = 0; h < nh; ++h) {
                if (std::isinf(rl[h])) {
                  EXPECT_TRUE(std::isinf(lse[i * nh + h]) && lse[i * nh + h] < 0);
                } else {
                  ASSERT_NEAR(lse[i * nh + h], rl[h], 1e-4) << tiers.name << " layer " << l;
                }
              }
            }
          }
        }
      }
      const SpillStats st = spill->stats();
      if (tiers.ssd) {
        EXPECT_GT(st.bytes_read, 0) << tiers.name;
      } else {
        EXPECT_EQ(st.bytes_read, 0);
      }
      spill.reset();
      if (!dir.empty()) std::filesystem::remove_all(dir);
    }
  }
}

TEST(KvSpill, CorruptedFileIsReportedAndNoRoomIsClear) {
  const engine::KvLayout L = spill_layout(kernels::KvDtype::kF32);
  const std::string dir = temp_dir();
  auto pool = std::move(engine::KvPool::create(L, 16).value());
  engine::BlockTable t;
  ASSERT_TRUE(t.reserve(*pool, 20));
  t.commit(20);
  SpillOptions o;
  o.dir = dir;
  auto spill = std::move(KvSpill::create(L, o).value());
  ASSERT_TRUE(spill->append(*pool, t, 20).ok());
  // Flip one byte of layer 1's region (regions are laid out layer after layer, 4 KiB aligned).
  const int64_t region = (2 * 20 * L.token_floats() * 4 + 4095) / 4096 * 4096;
  unsigned char b = 0;
  ASSERT_EQ(::pread(spill->file_descriptor(), &b, 1, region + 5), 1);
  b ^= 0x40;
  ASSERT_EQ(::pwrite(spill->file_descriptor(), &b, 1, region + 5), 1);
  ::fdatasync(spill->file_descriptor());
  const float q[2 * 24] = {};
  float out[2 * 24] = {}, lse[2] = {-INFINITY, -INFINITY};
  const int32_t qp = 1000;
  EXPECT_TRUE(spill->attend(0, q, 1, 2, &qp, 0.2f, out, lse).ok());
  const Status st = spill->attend(1, q, 1, 2, &qp, 0.2f, out, lse);
  EXPECT_EQ(st.code(), StatusCode::kCorruption) << st.to_string();
  EXPECT_NE(st.message().find("layer 1"), std::string::npos) << st.to_string();
  spill.reset();
  std::filesystem::remove_all(dir);

  // Host memory only, and too little of it.
  SpillOptions small;
  small.dram_bytes = 1000;
  auto s2 = std::move(KvSpill::create(L, small).value());
  const Status full = s2->append(*pool, t, 20);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("no SSD tier"), std::string::npos) << full.to_string();
  EXPECT_FALSE(KvSpill::create(L, SpillOptions{}).ok());
  t.release(*pool);
}

// One long sequence on 1 and 2 workers whose pools hold about a third of it: the prefill spills
// whole blocks between chunks, the decode spills again, and tokens and logits are those of one
// worker whose pool holds everything.
TEST(ShardedSequenceSpill, SmallPoolsGiveTheSameTokensAsOneLargePool) {
  const engine::ModelConfig cfg = sp_config(false);  // 512 bytes of f32 KV a token
  const int length = 1001, decode = 24;
  auto prompt = random_tokens(length, 23, cfg.vocab_size);
  auto ref_model = sp_model(cfg);
  const Reference ref = reference(*ref_model, prompt, decode);
  const std::string dir = temp_dir();
  const size_t pool_bytes = 22 * 16 * 512;  // 22 blocks: 352 tokens
  for (int workers : {1, 2}) {
    for (const Tiers& tiers : {Tiers{"memory", int64_t{1} << 30, false}, Tiers{"ssd", 0, true},
                               Tiers{"memory+ssd", 40 * 512, true}}) {
      auto comms = make_thread_group(workers).value();
      std::mutex mu;
      double worst = 0;
      std::vector<std::vector<int32_t>> gen(workers);
      std::vector<SpillStats> stats(workers);
      std::vector<int64_t> held(workers);
      auto st = run_ranks(comms, [&](Communicator& comm) -> Status {
        auto model = sp_model(cfg, pool_bytes);
        if (model == nullptr) return Status::Internal("model");
        SpillOptions o;
        o.dram_bytes = tiers.dram_bytes;
        if (tiers.ssd) o.dir = dir;
        ShardedSequence seq(*model, comm, PartitionKind::kZigzag, 37, o);
        std::vector<float> logits;
        RAGD_RETURN_IF_ERROR(seq.prefill(prompt, &logits));
        double w = max_abs_diff(logits, ref.prompt_logits.back());
        std::vector<int32_t> g;
        for (int i = 0; i < decode; ++i) {
          g.push_back(argmax(logits));
          RAGD_RETURN_IF_ERROR(seq.decode(g.back(), &logits));
          w = std::max(w, max_abs_diff(logits, ref.decode_logits[i]));
        }
        std::lock_guard lk(mu);
        worst = std::max(worst, w);
        gen[comm.rank()] = g;
        stats[comm.rank()] = seq.spill_stats();
        held[comm.rank()] = seq.shard_tokens();
        return Status::OK();
      });
      const std::string what = std::string(tiers.name) + " P=" + std::to_string(workers);
      for (auto& s : st) ASSERT_TRUE(s.ok()) << what << ": " << s.to_string();
      EXPECT_LE(worst, kLogitTol) << what;
      int64_t total = 0;
      for (int r = 0; r < workers; ++r) {
        EXPECT_EQ(gen[r], ref.generated) << what << " rank " << r;
        EXPECT_GT(stats[r].dram_tokens + stats[r].ssd_tokens, 0) << what << " rank " << r << " spilled nothing";
        if (tiers.ssd) EXPECT_GT(stats[r].ssd_tokens, 0) << what;
        if (!tiers.ssd) EXPECT_EQ(stats[r].ssd_tokens, 0) << what;
        total += held[r];
      }
      EXPECT_EQ(total, length + decode) << what;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ragd::seqparallel
