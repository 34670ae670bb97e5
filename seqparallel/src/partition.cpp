#include "ragd/seqparallel/partition.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "ragd/common/check.h"

namespace ragd::seqparallel {

namespace {

// Chunk c of n over [0, length): the first length % n chunks hold one token more.
void chunk_bounds(int64_t length, int64_t n, int64_t c, int64_t* begin, int64_t* end) {
  const int64_t base = length / n, extra = length % n;
  *begin = c * base + std::min(c, extra);
  *end = *begin + base + (c < extra ? 1 : 0);
}

void append_range(Shard& s, int64_t begin, int64_t end) {
  for (int64_t t = begin; t < end; ++t) s.positions.push_back(static_cast<int32_t>(t));
}

}  // namespace

Result<std::vector<Shard>> partition(int64_t length, int workers, PartitionKind kind) {
  if (workers < 1) return Status::InvalidArgument("partition: workers must be at least 1, got " + std::to_string(workers));
  if (length < 0 || length > INT32_MAX) {
    return Status::InvalidArgument("partition: length " + std::to_string(length) + " is outside [0, 2^31 - 1]");
  }
  std::vector<Shard> shards(workers);
  int64_t b = 0, e = 0;
  switch (kind) {
    case PartitionKind::kContiguous:
      for (int w = 0; w < workers; ++w) {
        chunk_bounds(length, workers, w, &b, &e);
        append_range(shards[w], b, e);
      }
      break;
    case PartitionKind::kZigzag:
      for (int w = 0; w < workers; ++w) {
        chunk_bounds(length, 2 * workers, w, &b, &e);
        append_range(shards[w], b, e);
        chunk_bounds(length, 2 * workers, 2 * workers - 1 - w, &b, &e);
        append_range(shards[w], b, e);
      }
      break;
    case PartitionKind::kStriped:
      for (int64_t t = 0; t < length; ++t) shards[t % workers].positions.push_back(static_cast<int32_t>(t));
      break;
  }
  return shards;
}

std::vector<int64_t> shard_sizes(int64_t length, int workers, PartitionKind kind) {
  RAGD_CHECK(workers >= 1 && length >= 0) << "shard_sizes: length " << length << ", workers " << workers;
  std::vector<int64_t> n(workers, 0);
  int64_t b = 0, e = 0;
  for (int w = 0; w < workers; ++w) {
    switch (kind) {
      case PartitionKind::kContiguous:
        chunk_bounds(length, workers, w, &b, &e);
        n[w] = e - b;
        break;
      case PartitionKind::kZigzag:
        chunk_bounds(length, 2 * workers, w, &b, &e);
        n[w] = e - b;
        chunk_bounds(length, 2 * workers, 2 * workers - 1 - w, &b, &e);
        n[w] += e - b;
        break;
      case PartitionKind::kStriped:
        n[w] = length / workers + (w < length % workers ? 1 : 0);  // positions t with t mod workers = w
        break;
    }
  }
  return n;
}

std::vector<double> causal_work(const std::vector<Shard>& shards) {
  std::vector<double> w;
  for (const Shard& s : shards) {
    double sum = 0.0;
    for (int32_t t : s.positions) sum += static_cast<double>(t) + 1.0;
    w.push_back(sum);
  }
  return w;
}

}  // namespace ragd::seqparallel
