// Engine steps with explicit positions and slots, truncate-and-recompute, and the per-layer hook,
// all checked against the contiguous computation of the same tokens (engine, kSelfTol) and the
// naive double reference (tiny_model.h, kRefTol):
//   - tokens fed out of order across steps, into slots that differ from their positions and with
//     holes in between, give the logits and KV of the contiguous run; appends onto such a table
//     (the masked attention path) continue it exactly;
//   - truncate then recompute equals never having computed the discarded tokens, also when the
//     truncated block is shared with a fork (copy-on-write), and the fork is unaffected;
//   - a hook that changes nothing is bit-identical; a hook that keeps a subset of rows gives those
//     rows the full computation's logits (sparse recompute over reused KV); a hook that replaces
//     attention by local + remote partial states merged by LSE (ring attention on a zigzag shard)
//     gives the full computation's logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "model_fixture.h"
#include "ragd/engine/layer_hook.h"
#include "ragd/engine/model.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/lse_merge.h"
#include "tiny_model.h"

namespace ragd::engine {
namespace {

using namespace testing;  // model_fixture.h / tiny_model.h: Fixture, Reference, random_tokens, err, tolerances

constexpr double kKvTol = 1e-5;  // K/V of the same token computed in differently shaped steps

std::vector<std::vector<double>> reference(const Fixture& f, const std::vector<int32_t>& toks) {
  std::vector<std::vector<double>> ref;
  Reference(f.cfg, f.w).run(toks, &ref);
  return ref;
}

// One step of one sequence with explicit placement (empty vectors = the defaults).
Status placed_step(Fixture& f, BlockTable& t, const std::vector<int32_t>& toks, const std::vector<int32_t>& pos,
                   const std::vector<int32_t>& slots, SeqStep::Logits mode, StepOutput* out,
                   LayerHook* hook = nullptr) {
  SeqStep s{&t, toks, mode, pos, slots};
  return hook == nullptr ? f.model->forward({&s, 1}, out) : f.model->forward_with_hook({&s, 1}, *hook, out);
}

// K and V of one slot of one layer, concatenated.
std::vector<float> slot_kv(Fixture& f, const BlockTable& t, int layer, int slot) {
  const size_t tf = f.model->kv_pool().layout().token_floats();
  std::vector<float> k(tf), v(tf);
  t.read(f.model->kv_pool(), layer, slot, 1, k.data(), v.data());
  k.insert(k.end(), v.begin(), v.end());
  return k;
}

std::vector<float> all_kv(Fixture& f, const BlockTable& t) {
  std::vector<float> all;
  for (int l = 0; l < f.cfg.num_hidden_layers; ++l) {
    for (int s = 0; s < t.num_tokens(); ++s) {
      auto kv = slot_kv(f, t, l, s);
      all.insert(all.end(), kv.begin(), kv.end());
    }
  }
  return all;
}

// ---- non-contiguous steps ------------------------------------------------------------------------

class OutOfOrder : public ::testing::TestWithParam<int> {};  // block size

// Positions 0..12 shuffled into slots 20..32 (slots 0..19 are holes during the first step), then
// positions 13..32 shuffled into slots 0..19; then a 7-token chunk and a decode appended by default
// (positions 33.., onto a table whose slots no longer hold their own positions).
TEST_P(OutOfOrder, EqualsContiguousComputation) {
  Fixture f(Variant::kQwen2Bias, GetParam());
  const int n = 33;
  auto toks = random_tokens(n + 8, 201);
  const auto ref = reference(f, toks);
  std::vector<int32_t> head(toks.begin(), toks.begin() + n);
  BlockTable c;  // contiguous
  StepOutput full = f.step(c, head, SeqStep::Logits::kAll);

  std::mt19937 rng(202);
  BlockTable t;
  auto run_part = [&](int p0, int p1, int slot_of_p0) {
    std::vector<int32_t> pos(p1 - p0);
    std::iota(pos.begin(), pos.end(), p0);
    std::shuffle(pos.begin(), pos.end(), rng);
    std::vector<int32_t> ids, slots;
    for (int32_t p : pos) {
      ids.push_back(toks[p]);
      slots.push_back(slot_of_p0 + (p - p0));
    }
    StepOutput out;
    ASSERT_TRUE(placed_step(f, t, ids, pos, slots, SeqStep::Logits::kAll, &out).ok());
    for (size_t i = 0; i < pos.size(); ++i) {
      EXPECT_LT(err(out.row(static_cast<int>(i)), ref[pos[i]]), kRefTol) << "position " << pos[i];
      EXPECT_LT(err(out.row(static_cast<int>(i)), full.row(pos[i])), kSelfTol) << "position " << pos[i];
    }
  };
  run_part(0, 13, 20);
  EXPECT_EQ(t.num_tokens(), n);
  EXPECT_EQ(t.position(0), kNoPosition);  // a hole until the second step
  run_part(13, n, 0);
  ASSERT_EQ(t.num_tokens(), n);
  ASSERT_FALSE(t.positions_are_slots());
  for (int p = 0; p < n; ++p) {
    const int slot = p < 13 ? 20 + p : p - 13;
    ASSERT_EQ(t.position(slot), p);
    for (int l = 0; l < f.cfg.num_hidden_layers; ++l) {
      EXPECT_LT(err(slot_kv(f, t, l, slot), slot_kv(f, c, l, p)), kKvTol) << "layer " << l << " position " << p;
    }
  }
  // Default appends continue at slot = position = 33 (attention masks by the stored positions).
  std::vector<int32_t> chunk(toks.begin() + n, toks.begin() + n + 7), last{toks[n + 7]};
  StepOutput oc = f.step(t, chunk, SeqStep::Logits::kAll);
  for (int i = 0; i < 7; ++i) EXPECT_LT(err(oc.row(i), ref[n + i]), kRefTol) << "chunk row " << i;
  StepOutput od = f.step(t, last, SeqStep::Logits::kLast);
  EXPECT_LT(err(od.row(0), ref[n + 7]), kRefTol);
  EXPECT_EQ(t.position(n + 7), n + 7);
  t.release(f.model->kv_pool());
  c.release(f.model->kv_pool());
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, OutOfOrder, ::testing::Values(1, 3, 16));

// Two sequences in one batch, one appending contiguously (fast path), one writing explicit slots:
// each equals running alone.
TEST(Positions, MixedBatchEqualsAlone) {
  Fixture f(Variant::kLlama, 3);
  auto a = random_tokens(7, 211), b = random_tokens(33, 212);
  std::vector<int32_t> pos(33), slots(33);
  std::iota(pos.begin(), pos.end(), 0);
  std::reverse(pos.begin(), pos.end());
  for (int i = 0; i < 33; ++i) slots[i] = pos[i];
  std::vector<int32_t> bp;
  for (int32_t p : pos) bp.push_back(b[p]);
  BlockTable ta, tb, ua, ub;
  std::vector<SeqStep> batch{{&ta, a, SeqStep::Logits::kAll}, {&tb, bp, SeqStep::Logits::kAll, pos, slots}};
  StepOutput out;
  ASSERT_TRUE(f.model->forward(batch, &out).ok());
  StepOutput oa = f.step(ua, a, SeqStep::Logits::kAll);
  StepOutput ob = f.step(ub, b, SeqStep::Logits::kAll);
  for (int r = 0; r < 7; ++r) EXPECT_LT(err(out.row(r), oa.row(r)), kSelfTol);
  for (int i = 0; i < 33; ++i) EXPECT_LT(err(out.row(out.row_begin[1] + i), ob.row(pos[i])), kSelfTol) << i;
  EXPECT_TRUE(tb.positions_are_slots());  // every slot holds its own position once the step is in
  for (auto* t : {&ta, &tb, &ua, &ub}) t->release(f.model->kv_pool());
}

// Rewriting single slots in the middle (one-row steps: the decode kernel with a query position
// below the sequence end) over exact KV reproduces the full computation's logits at those slots.
TEST(Positions, SingleSlotRewriteEqualsFull) {
  Fixture f(Variant::kLinearRope, 16);
  auto toks = random_tokens(129, 225);
  BlockTable full;
  StepOutput ref = f.step(full, toks, SeqStep::Logits::kAll);
  BlockTable t = full.fork(f.model->kv_pool());
  for (int slot : {0, 10, 64, 128}) {
    StepOutput out;
    ASSERT_TRUE(placed_step(f, t, {toks[slot]}, {}, {slot}, SeqStep::Logits::kLast, &out).ok());
    EXPECT_LT(err(out.row(0), ref.row(slot)), kSelfTol) << "slot " << slot;
  }
  EXPECT_EQ(t.num_tokens(), 129);
  EXPECT_TRUE(t.positions_are_slots());
  t.release(f.model->kv_pool());
  full.release(f.model->kv_pool());
}

TEST(Positions, BadPlacementChangesNothing) {
  Fixture f(Variant::kLlama);
  auto toks = random_tokens(3, 221);
  BlockTable t;
  StepOutput out;
  Status st = placed_step(f, t, toks, {0, 1}, {}, SeqStep::Logits::kLast, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("2 positions for 3 tokens"), std::string::npos) << st.message();
  st = placed_step(f, t, toks, {}, {4, 2, 4}, SeqStep::Logits::kLast, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("slot 4 twice"), std::string::npos) << st.message();
  st = placed_step(f, t, toks, {0, -1, 2}, {}, SeqStep::Logits::kLast, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("position 1 is -1"), std::string::npos) << st.message();
  st = placed_step(f, t, toks, {}, {0, 1, 1 << 29}, SeqStep::Logits::kLast, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("outside the KV pool"), std::string::npos) << st.message();
  EXPECT_EQ(t.num_tokens(), 0);
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

// ---- truncate and recompute ----------------------------------------------------------------------

class TruncateRecompute : public ::testing::TestWithParam<int> {};  // block size

// 33 tokens computed, a fork taken (it shares the block the cut falls in), truncated to 20 and
// continued with 13 different tokens == the 20-token prefix continued directly; the fork still
// decodes the original sequence.
TEST_P(TruncateRecompute, EqualsNeverComputed) {
  Fixture f(Variant::kLlama3Rope, GetParam());
  const int n = 33, m = 20;
  auto a = random_tokens(n, 231), b = random_tokens(13, 232);
  BlockTable t;
  f.step(t, a, SeqStep::Logits::kNone);
  BlockTable fork = t.fork(f.model->kv_pool());
  const auto fork_kv = all_kv(f, fork);
  t.truncate(f.model->kv_pool(), m);
  EXPECT_EQ(t.num_tokens(), m);
  StepOutput again = f.step(t, b, SeqStep::Logits::kAll);

  std::vector<int32_t> prefix(a.begin(), a.begin() + m), joined(prefix);
  joined.insert(joined.end(), b.begin(), b.end());
  const auto ref = reference(f, joined);
  BlockTable fresh;
  f.step(fresh, prefix, SeqStep::Logits::kNone);
  StepOutput direct = f.step(fresh, b, SeqStep::Logits::kAll);
  for (int i = 0; i < 13; ++i) {
    EXPECT_LT(err(again.row(i), direct.row(i)), kSelfTol) << "row " << i;
    EXPECT_LT(err(again.row(i), ref[m + i]), kRefTol) << "row " << i;
  }
  ASSERT_EQ(t.num_tokens(), fresh.num_tokens());
  EXPECT_LT(err(all_kv(f, t), all_kv(f, fresh)), kKvTol);
  // The fork kept every byte and still continues the original 33 tokens.
  EXPECT_EQ(all_kv(f, fork), fork_kv);
  std::vector<int32_t> orig(a);
  orig.push_back(b[0]);
  StepOutput d = f.step(fork, std::span(b).subspan(0, 1), SeqStep::Logits::kLast);
  EXPECT_LT(err(d.row(0), reference(f, orig).back()), kRefTol);
  for (auto* x : {&t, &fork, &fresh}) x->release(f.model->kv_pool());
  EXPECT_EQ(f.model->kv_pool().used_blocks(), 0u);
}

INSTANTIATE_TEST_SUITE_P(BlockSizes, TruncateRecompute, ::testing::Values(1, 3, 16));

// ---- layer hooks ---------------------------------------------------------------------------------

struct NoOpHook : LayerHook {
  int qkv_calls = 0, att_calls = 0, rows_seen = 0;
  bool call_local = false;  // replace attention by the backend's own local()
  Status on_qkv(const LayerQkv& qkv, RowSelection* keep) override {
    ++qkv_calls;
    rows_seen = qkv.rows;
    return Status::OK();
  }
  Result<bool> on_attention(const LayerAttention& att) override {
    ++att_calls;
    if (!call_local) return false;
    RAGD_RETURN_IF_ERROR(att.local());
    return true;
  }
};

// A batch mixing a fresh prefill, a chunk onto cached KV, a decode and an out-of-order step, with
// a hook that changes nothing: logits and KV are bit-identical to forward().
TEST(LayerHookTest, NoOpHookIsBitIdentical) {
  for (bool call_local : {false, true}) {
    Fixture f(Variant::kQwen2Bias, 3);
    auto p0 = random_tokens(33, 241), p1 = random_tokens(27, 242), p2 = random_tokens(130, 243),
         p3 = random_tokens(7, 244);
    std::vector<int32_t> pos3{6, 0, 5, 1, 4, 2, 3};
    auto run = [&](LayerHook* hook, std::vector<BlockTable>& tabs) {
      tabs.resize(4);
      f.step(tabs[1], std::span(p1).subspan(0, 20), SeqStep::Logits::kNone);
      f.step(tabs[2], std::span(p2).subspan(0, 129), SeqStep::Logits::kNone);
      std::vector<SeqStep> batch{{&tabs[0], p0, SeqStep::Logits::kAll},
                                 {&tabs[1], std::span(p1).subspan(20), SeqStep::Logits::kAll},
                                 {&tabs[2], std::span(p2).subspan(129), SeqStep::Logits::kLast},
                                 {&tabs[3], p3, SeqStep::Logits::kAll, pos3, pos3}};
      StepOutput out;
      Status st = hook == nullptr ? f.model->forward(batch, &out) : f.model->forward_with_hook(batch, *hook, &out);
      EXPECT_TRUE(st.ok()) << st.to_string();
      return out;
    };
    std::vector<BlockTable> plain, hooked;
    NoOpHook hook;
    hook.call_local = call_local;
    StepOutput a = run(nullptr, plain);
    StepOutput b = run(&hook, hooked);
    EXPECT_EQ(a.logits, b.logits);
    EXPECT_EQ(a.row_begin, b.row_begin);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(all_kv(f, plain[i]), all_kv(f, hooked[i])) << "seq " << i;
    EXPECT_EQ(hook.qkv_calls, f.cfg.num_hidden_layers);
    EXPECT_EQ(hook.att_calls, f.cfg.num_hidden_layers);
    EXPECT_EQ(hook.rows_seen, 33 + 7 + 1 + 7);
    for (auto& t : plain) t.release(f.model->kv_pool());
    for (auto& t : hooked) t.release(f.model->kv_pool());
  }
}

// Sparse recompute: a hook keeps a few rows after layer 0 (the others keep the KV already in their
// slots). With the slots holding exactly the KV of the full computation, the kept rows' logits
// equal it. At layer 1 the hook measures the deviation of the fresh K/V from the stored KV
// (CacheBlend's criterion; ~0 here) and sees only the kept rows.
struct KeepRowsHook : LayerHook {
  Fixture* f = nullptr;
  const BlockTable* table = nullptr;
  std::vector<int32_t> keep_positions;
  int rows_at_layer1 = -1;
  double deviation = -1.0;
  Status on_qkv(const LayerQkv& qkv, RowSelection* keep) override {
    if (qkv.layer == 0) {
      std::vector<int> rows;
      for (int r = 0; r < qkv.rows; ++r) {
        if (std::count(keep_positions.begin(), keep_positions.end(), qkv.row_info[r].position)) rows.push_back(r);
      }
      keep->keep(rows);
    } else if (qkv.layer == 1) {
      rows_at_layer1 = qkv.rows;
      const size_t kv_floats = static_cast<size_t>(qkv.shape.num_kv_heads) * qkv.shape.head_dim;
      std::vector<float> k(kv_floats), v(kv_floats);
      deviation = 0.0;
      for (int r = 0; r < qkv.rows; ++r) {
        table->read(f->model->kv_pool(), 1, qkv.row_info[r].slot, 1, k.data(), v.data());
        const float* fk = qkv.k + r * qkv.row_stride;
        for (size_t c = 0; c < kv_floats; ++c) deviation = std::max<double>(deviation, std::fabs(fk[c] - k[c]));
      }
    }
    return Status::OK();
  }
};

TEST(LayerHookTest, KeptRowsEqualFullComputation) {
  Fixture f(Variant::kLlama, 3);
  const int n = 33;
  auto toks = random_tokens(n, 251);
  BlockTable full;
  StepOutput ref = f.step(full, toks, SeqStep::Logits::kAll);
  const auto full_kv = all_kv(f, full);
  std::mt19937 rng(252);
  for (int target : {0, 5, 17, 32}) {
    // A fork shares every block: the sparse rewrite copies only the blocks it writes.
    BlockTable t = full.fork(f.model->kv_pool());
    std::vector<int32_t> pos;
    for (int p = 0; p < n; ++p) {
      if (p != target) pos.push_back(p);
    }
    std::shuffle(pos.begin(), pos.end(), rng);
    pos.push_back(target);  // last entry: its logits are the ones returned (kLast)
    std::vector<int32_t> ids;
    for (int32_t p : pos) ids.push_back(toks[p]);
    KeepRowsHook hook;
    hook.f = &f;
    hook.table = &t;
    hook.keep_positions = {target, 3, 11, 30};
    StepOutput out;
    Status st = placed_step(f, t, ids, {}, pos, SeqStep::Logits::kLast, &out, &hook);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_LT(err(out.row(0), ref.row(target)), kSelfTol) << "target " << target;
    EXPECT_EQ(hook.rows_at_layer1, target == 3 || target == 11 || target == 30 ? 3 : 4);
    EXPECT_LT(hook.deviation, 1e-4);
    EXPECT_TRUE(t.positions_are_slots());
    for (int l = 0; l < f.cfg.num_hidden_layers; ++l) {
      for (int p : hook.keep_positions) {
        EXPECT_LT(err(slot_kv(f, t, l, p), slot_kv(f, full, l, p)), kKvTol) << "layer " << l << " slot " << p;
      }
    }
    t.release(f.model->kv_pool());
  }
  EXPECT_EQ(all_kv(f, full), full_kv);  // copy-on-write kept the source intact
  full.release(f.model->kv_pool());
}

TEST(LayerHookTest, DroppingARowWithLogitsFails) {
  struct DropAll : LayerHook {
    Status on_qkv(const LayerQkv& qkv, RowSelection* keep) override {
      keep->keep({});
      return Status::OK();
    }
  } hook;
  Fixture f(Variant::kLlama);
  auto toks = random_tokens(7, 261);
  BlockTable t;
  StepOutput out;
  Status st = placed_step(f, t, toks, {}, {}, SeqStep::Logits::kLast, &out, &hook);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("logits"), std::string::npos) << st.message();
  EXPECT_EQ(t.num_tokens(), 0);  // not committed
  t.release(f.model->kv_pool());
}

// Ring attention on a zigzag shard: rank 0 of 2 holds chunks 0 and 3 of a 33-token sequence
// (positions 0..8 and 25..32 in slots 0..16). Its hook computes local attention with local() and
// the remote part over the other rank's KV (here read from a full run, layer by layer) with the
// positions kernel, merges them by LSE, and the shard's logits equal the full computation's.
struct RingHook : LayerHook {
  Fixture* f = nullptr;
  const BlockTable* remote = nullptr;  // holds positions 0..32 (slot = position)
  int r0 = 0, r1 = 0;                  // remote positions [r0, r1)
  Result<bool> on_attention(const LayerAttention& att) override {
    RAGD_RETURN_IF_ERROR(att.local());
    const int n = r1 - r0, hd = att.shape.head_dim, nh = att.shape.num_heads;
    const size_t tf = static_cast<size_t>(att.shape.num_kv_heads) * hd;
    std::vector<float> k(n * tf), v(n * tf);
    remote->read(f->model->kv_pool(), att.layer, r0, n, k.data(), v.data());
    std::vector<int32_t> key_pos(n), q_pos(att.rows), table{0};
    std::iota(key_pos.begin(), key_pos.end(), r0);
    for (int r = 0; r < att.rows; ++r) q_pos[r] = att.row_info[r].position;
    kernels::PagedKv kv{k.data(), v.data(), table.data(), n, att.shape.num_kv_heads, hd, n, key_pos.data()};
    std::vector<float> o(static_cast<size_t>(att.rows) * nh * hd), lse(static_cast<size_t>(att.rows) * nh);
    if (att.q_stride != static_cast<size_t>(nh) * hd) return Status::Internal("q rows are not contiguous");
    RAGD_RETURN_IF_ERROR(
        kernels::attention_prefill_positions(att.q, att.rows, nh, kv, att.scale, q_pos.data(), o.data(), lse.data()));
    kernels::merge_states(att.rows * nh, hd, att.out, att.lse, o.data(), lse.data(), att.out, att.lse);
    return true;
  }
};

TEST(LayerHookTest, RingAttentionOnZigzagShardEqualsFull) {
  Fixture f(Variant::kLlama3Rope, 3);
  const int n = 33;
  auto toks = random_tokens(n, 271);
  BlockTable full;
  StepOutput ref = f.step(full, toks, SeqStep::Logits::kAll);
  std::vector<int32_t> pos, ids;
  for (int p = 0; p < 9; ++p) pos.push_back(p);
  for (int p = 25; p < n; ++p) pos.push_back(p);
  for (int32_t p : pos) ids.push_back(toks[p]);
  RingHook hook;
  hook.f = &f;
  hook.remote = &full;
  hook.r0 = 9;
  hook.r1 = 25;
  BlockTable shard;
  StepOutput out;
  Status st = placed_step(f, shard, ids, pos, {}, SeqStep::Logits::kAll, &out, &hook);  // slots 0..16
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(shard.num_tokens(), 17);
  const auto dref = reference(f, toks);
  for (size_t i = 0; i < pos.size(); ++i) {
    EXPECT_LT(err(out.row(static_cast<int>(i)), ref.row(pos[i])), kSelfTol) << "position " << pos[i];
    EXPECT_LT(err(out.row(static_cast<int>(i)), dref[pos[i]]), kRefTol) << "position " << pos[i];
    EXPECT_EQ(shard.position(static_cast<int>(i)), pos[i]);
  }
  shard.release(f.model->kv_pool());
  full.release(f.model->kv_pool());
}

}  // namespace
}  // namespace ragd::engine
