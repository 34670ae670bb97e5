// The sequence-parallel KV share (sharded_sequence.h: tokens_held_per_worker, kv_blocks_per_worker;
// partition.h: shard_sizes) against naive counts, for every partition kind on odd sizes (7, 33,
// 129, 1000 tokens; 2, 3, 4 workers), whole and chunked prefill, and decode steps placed by a naive
// model of the workers' pools. That the real ShardedSequence leaves exactly these counts on its
// ranks is checked in ring_test.cpp (ShardedDecode.*).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/sharded_decode.h"
#include "ragd/seqparallel/sharded_sequence.h"

namespace ragd::seqparallel {
namespace {

constexpr PartitionKind kKinds[] = {PartitionKind::kContiguous, PartitionKind::kZigzag, PartitionKind::kStriped};
constexpr int64_t kLengths[] = {7, 33, 129, 1000};
constexpr int kWorkers[] = {2, 3, 4};

std::string name(PartitionKind k, int64_t len, int p, int chunk = 0) {
  return std::string(partition_name(k)) + " L=" + std::to_string(len) + " P=" + std::to_string(p) +
         (chunk > 0 ? " chunk=" + std::to_string(chunk) : "");
}

// Naive: each prompt position looked up in the listed shards of its ring step's range.
std::vector<int64_t> naive_prompt_count(int64_t len, int p, PartitionKind kind, int chunk) {
  std::vector<int64_t> n(p, 0);
  const int64_t span = chunk > 0 ? int64_t{chunk} * p : std::max<int64_t>(len, 1);
  for (int64_t t = 0; t < len; ++t) {
    const int64_t begin = t / span * span;
    const auto shards = partition(std::min(span, len - begin), p, kind).value();
    for (int w = 0; w < p; ++w) {
      const auto& pos = shards[w].positions;
      n[w] += std::count(pos.begin(), pos.end(), static_cast<int32_t>(t - begin));
    }
  }
  return n;
}

// Naive pools: `blocks` blocks of `bs` slots per worker; a shard table holding t tokens owns
// ceil(t / bs) blocks, the scratch table one block once its worker has skipped a step; each step
// goes to the most free slots (free blocks plus the rest of the last block), lowest rank on ties.
std::vector<int64_t> naive_decode(std::vector<int64_t> held, int64_t steps, int bs) {
  const int p = static_cast<int>(held.size());
  const int64_t blocks = 1 << 20;
  std::vector<int64_t> scratch_blocks(p, 0);
  for (int64_t i = 0; i < steps; ++i) {
    int best = -1;
    int64_t best_room = -1;
    for (int w = 0; w < p; ++w) {
      const int64_t table_blocks = (held[w] + bs - 1) / bs;
      const int64_t free_blocks = blocks - table_blocks - scratch_blocks[w];
      const int64_t room = free_blocks * bs + table_blocks * bs - held[w];
      if (room > best_room) best = w, best_room = room;
    }
    ++held[best];
    for (int w = 0; w < p; ++w) {
      if (w != best) scratch_blocks[w] = 1;
    }
  }
  return held;
}

TEST(KvShare, ShardSizesAreThePartitionsSizes) {
  for (PartitionKind k : kKinds) {
    for (int p : {1, 2, 3, 4, 7}) {
      for (int64_t len : {0, 1, 2, 7, 8, 33, 129, 1000, 1001}) {
        const auto shards = partition(len, p, k).value();
        const auto sizes = shard_sizes(len, p, k);
        ASSERT_EQ(sizes.size(), shards.size()) << name(k, len, p);
        for (int w = 0; w < p; ++w) EXPECT_EQ(sizes[w], shards[w].size()) << name(k, len, p) << " worker " << w;
      }
    }
  }
}

TEST(KvShare, PromptTokensPerWorkerAreANaiveCount) {
  for (PartitionKind k : kKinds) {
    for (int64_t len : kLengths) {
      for (int p : kWorkers) {
        for (int chunk : {0, 1, 5, 37}) {
          SpSequence s;
          s.prompt_tokens = len;
          s.workers = p;
          s.kind = k;
          s.max_chunk_tokens = chunk;
          EXPECT_EQ(tokens_held_per_worker(s), naive_prompt_count(len, p, k, chunk)) << name(k, len, p, chunk);
        }
      }
    }
  }
}

TEST(KvShare, DecodeTokensGoWhereTheDecoderPutsThem) {
  for (PartitionKind k : kKinds) {
    for (int64_t len : kLengths) {
      for (int p : kWorkers) {
        for (int bs : {16, 7}) {
          for (int64_t decode : {1, 7, 33, 129}) {
            SpSequence s;
            s.prompt_tokens = len;
            s.decode_tokens = decode;
            s.workers = p;
            s.kind = k;
            s.block_size = bs;
            const auto held = tokens_held_per_worker(s);
            const auto want = naive_decode(naive_prompt_count(len, p, k, 0), decode, bs);
            ASSERT_EQ(held, want) << name(k, len, p) << " bs=" << bs << " decode=" << decode;
            int64_t blocks = 0;
            for (int64_t t : want) blocks = std::max(blocks, (t + bs - 1) / bs);
            EXPECT_EQ(kv_blocks_per_worker(s), blocks + 1) << name(k, len, p) << ": + the scratch block";
          }
        }
      }
    }
  }
}

TEST(KvShare, OneWorkerHoldsEverythingAndNeedsNoScratch) {
  SpSequence s;
  s.prompt_tokens = 33;
  s.decode_tokens = 7;
  s.block_size = 16;
  EXPECT_EQ(tokens_held_per_worker(s), std::vector<int64_t>{40});
  EXPECT_EQ(kv_blocks_per_worker(s), 3);
  s.workers = 2;
  s.decode_tokens = 0;
  EXPECT_EQ(kv_blocks_per_worker(s), 2);  // zigzag 33 over 2: 17 and 16 tokens, no decode step
}

TEST(KvShare, DecodeOwnerIsTheMostRoomLowestRankOnTies) {
  EXPECT_EQ(decode_owner(std::vector<int64_t>{5}), 0);
  EXPECT_EQ(decode_owner(std::vector<int64_t>{3, 5, 5, 1}), 1);
  EXPECT_EQ(decode_owner(std::vector<int64_t>{-1, -1, 0}), 2);
  EXPECT_EQ(decode_owner(std::vector<int64_t>{7, 7}), 0);
}

}  // namespace
}  // namespace ragd::seqparallel
