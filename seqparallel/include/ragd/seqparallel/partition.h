// How a sequence's positions are split across the workers of a sequence-parallel group.
//
//   contiguous: worker w holds [w·L/P, (w+1)·L/P). With a causal mask the last worker's queries
//               see every key and the first worker's almost none: prefill work grows as 2w + 1.
//   zigzag:     the sequence is cut into 2P chunks; worker w holds chunks w and 2P-1-w, so every
//               worker holds one early and one late chunk and does the same causal work (the
//               balance ring attention needs).
//   striped:    position t goes to worker t mod P (balanced too, at token granularity).
// Chunk sizes differ by at most one token (the first L mod n chunks are one longer); a worker may
// hold no token when L < P (or L < 2P for zigzag).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"

namespace ragd::seqparallel {

enum class PartitionKind : uint8_t { kContiguous, kZigzag, kStriped };
inline constexpr auto kPartitionKindNames = make_enum_names<PartitionKind>(
    "sp_partition",
    {{PartitionKind::kZigzag, "zigzag"}, {PartitionKind::kContiguous, "contiguous"}, {PartitionKind::kStriped, "striped"}});
constexpr const auto& ragd_enum_names(PartitionKind) { return kPartitionKindNames; }
static_assert(enum_names_valid(kPartitionKindNames));
inline std::string_view partition_name(PartitionKind k) { return enum_name(k); }  // "zigzag", "contiguous", "striped"
// InvalidArgument listing the names otherwise.
inline Result<PartitionKind> parse_partition(std::string_view s) { return parse_enum<PartitionKind>(s); }

// Positions of one worker's tokens, ascending.
struct Shard {
  std::vector<int32_t> positions;
  int64_t size() const { return static_cast<int64_t>(positions.size()); }
};

// Positions [0, length) split across `workers` shards. InvalidArgument when workers < 1, length
// < 0, or length does not fit a position (2^31 - 1).
Result<std::vector<Shard>> partition(int64_t length, int workers, PartitionKind kind);

// The number of positions in each shard of partition(length, workers, kind), without listing
// them: O(workers). Aborts (RAGD_CHECK) when workers < 1 or length < 0.
std::vector<int64_t> shard_sizes(int64_t length, int workers, PartitionKind kind);

// Causal attention work of each shard (pairs (query, key) with key position <= query position,
// over the whole sequence), for load-balance reports: Σ_{t in shard} (t + 1).
std::vector<double> causal_work(const std::vector<Shard>& shards);

}  // namespace ragd::seqparallel
