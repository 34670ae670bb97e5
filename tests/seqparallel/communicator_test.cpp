// The threads transport: ordering per (source, tag), exact sizes, collectives, abort; and the
// partitions (every position exactly once, ascending, balance of the causal work).
#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/sp_group.h"
#include "ragd/seqparallel/sub_communicator.h"
#include "ragd/seqparallel/thread_communicator.h"
#include "sp_fixture.h"

namespace ragd::seqparallel {
namespace {

using testing::run_ranks;

TEST(ThreadCommunicator, PointToPointKeepsOrderPerSourceAndTag) {
  auto comms = make_thread_group(3).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    const int r = c.rank(), p = c.size();
    // Every rank sends 5 numbered messages on tags 0 and 1 to every other rank.
    std::vector<Request> reqs;
    std::vector<int> out(2 * 5 * p), in(2 * 5 * p, -1);
    for (int dst = 0; dst < p; ++dst) {
      if (dst == r) continue;
      for (int tag = 0; tag < 2; ++tag) {
        for (int i = 0; i < 5; ++i) {
          int& v = out[(tag * 5 + i) * p + dst];
          v = 1000 * r + 100 * tag + i;
          RAGD_ASSIGN_OR_RETURN(Request q, c.isend(dst, tag, &v, sizeof v));
          reqs.push_back(std::move(q));
        }
      }
    }
    // Receive tag 1 before tag 0, from the highest source first: matching is per (source, tag).
    for (int src = p - 1; src >= 0; --src) {
      if (src == r) continue;
      for (int tag = 1; tag >= 0; --tag) {
        for (int i = 0; i < 5; ++i) {
          RAGD_ASSIGN_OR_RETURN(Request q, c.irecv(src, tag, &in[(tag * 5 + i) * p + src], sizeof(int)));
          reqs.push_back(std::move(q));
        }
      }
    }
    RAGD_RETURN_IF_ERROR(wait_all(reqs));
    for (int src = 0; src < p; ++src) {
      if (src == r) continue;
      for (int tag = 0; tag < 2; ++tag) {
        for (int i = 0; i < 5; ++i) {
          if (in[(tag * 5 + i) * p + src] != 1000 * src + 100 * tag + i) return Status::Internal("out of order");
        }
      }
    }
    return Status::OK();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(ThreadCommunicator, SizeMismatchIsAnErrorOnBothSides) {
  auto comms = make_thread_group(2).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    std::vector<char> buf(16);
    if (c.rank() == 0) {
      RAGD_ASSIGN_OR_RETURN(Request q, c.isend(1, 3, buf.data(), 16));
      return q->wait();
    }
    RAGD_ASSIGN_OR_RETURN(Request q, c.irecv(0, 3, buf.data(), 8));
    return q->wait();
  });
  ASSERT_FALSE(st[1].ok());
  EXPECT_NE(st[1].message().find("expected 8 bytes"), std::string::npos) << st[1].to_string();
  EXPECT_FALSE(st[0].ok());
}

TEST(ThreadCommunicator, CollectivesAndBadArguments) {
  auto comms = make_thread_group(4).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    const int r = c.rank();
    double mine[2] = {r + 0.5, -r * 2.0};
    std::vector<double> all(2 * c.size());
    RAGD_RETURN_IF_ERROR(c.allgather(mine, sizeof mine, all.data()));
    for (int i = 0; i < c.size(); ++i) {
      if (all[2 * i] != i + 0.5 || all[2 * i + 1] != -i * 2.0) return Status::Internal("allgather");
    }
    std::vector<int> b(1000, r == 2 ? 7 : 0);
    std::iota(b.begin(), b.end(), r == 2 ? 7 : 0);
    RAGD_RETURN_IF_ERROR(c.broadcast(b.data(), sizeof(int) * b.size(), 2));
    if (b[0] != 7 || b[999] != 1006) return Status::Internal("broadcast");
    RAGD_RETURN_IF_ERROR(c.barrier());
    int x = 0;
    if (c.isend(r, 0, &x, 4).ok() || c.irecv(4, 0, &x, 4).ok() || c.isend((r + 1) % 4, -1, &x, 4).ok()) {
      return Status::Internal("a bad peer or a reserved tag was accepted");
    }
    if (c.broadcast(&x, 4, 9).ok()) return Status::Internal("a bad root was accepted");
    return Status::OK();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(ThreadCommunicator, AbortWakesEveryWaiter) {
  auto comms = make_thread_group(3).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    if (c.rank() == 2) return Status::Internal("rank 2 broke");  // run_ranks aborts the group
    int x = 0;
    RAGD_ASSIGN_OR_RETURN(Request q, c.irecv(2, 0, &x, 4));  // never sent
    return q->wait();
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[r].ok());
    EXPECT_NE(st[r].message().find("rank 2 broke"), std::string::npos) << st[r].to_string();
  }
}

TEST(ThreadCommunicator, TestPollsWithoutBlockingAndWaitIdleCompletes) {
  auto comms = make_thread_group(2).value();
  int got = 0;
  auto recv = comms[1]->irecv(0, 5, &got, sizeof got).value();
  EXPECT_FALSE(recv->test().value()) << "nothing was sent yet";
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    const int v = 42;
    auto s = comms[0]->isend(1, 5, &v, sizeof v).value();
    EXPECT_TRUE(s->wait().ok());  // completes once the receiver's poll copies it
  });
  EXPECT_TRUE(wait_idle(*recv).ok());
  sender.join();
  EXPECT_EQ(got, 42);
  // A poll on an aborted group reports the abort, and every rank can ask why without blocking.
  auto late = comms[1]->irecv(0, 6, &got, sizeof got).value();
  EXPECT_TRUE(comms[1]->abort_status().ok());
  comms[0]->abort(Status::Internal("gone"));
  EXPECT_NE(comms[1]->abort_status().message().find("gone"), std::string::npos);
  auto t = late->test();
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("gone"), std::string::npos);
}

// The first ranks of a group as a group of their own (the elastic degree): collectives among them
// only, while the last rank takes no part; then the whole group's collectives still line up.
TEST(SubCommunicator, CollectivesAmongTheFirstRanksOnly) {
  auto comms = make_thread_group(4).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    if (c.rank() < 3) {
      RAGD_ASSIGN_OR_RETURN(auto sub, make_sub_communicator(c, 3));
      if (sub->size() != 3 || sub->rank() != c.rank()) return Status::Internal("sub shape");
      int64_t mine = 100 + c.rank(), all[3] = {};
      RAGD_RETURN_IF_ERROR(sub->allgather(&mine, sizeof mine, all));
      for (int r = 0; r < 3; ++r)
        if (all[r] != 100 + r) return Status::Internal("sub allgather");
      int32_t v = c.rank() == 2 ? 77 : -1;
      RAGD_RETURN_IF_ERROR(sub->broadcast(&v, sizeof v, 2));
      if (v != 77) return Status::Internal("sub broadcast");
      RAGD_RETURN_IF_ERROR(sub->barrier());
      if (sub->isend(3, 0, &v, sizeof v).ok()) return Status::Internal("rank 3 is outside the sub-group");
      if (make_sub_communicator(c, 5).ok() || make_sub_communicator(c, 0).ok()) return Status::Internal("bad sizes");
    } else if (make_sub_communicator(c, 3).ok()) {
      return Status::Internal("rank 3 joined a sub-group of 3");
    }
    int64_t mine = 7 * c.rank(), all[4] = {};
    RAGD_RETURN_IF_ERROR(c.allgather(&mine, sizeof mine, all));
    for (int r = 0; r < 4; ++r)
      if (all[r] != 7 * r) return Status::Internal("group allgather after the sub-group's");
    return Status::OK();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(Partition, EveryPositionOnceAscendingSizesWithinOne) {
  for (auto kind : {PartitionKind::kContiguous, PartitionKind::kZigzag, PartitionKind::kStriped}) {
    for (int p : {1, 2, 3, 4, 7}) {
      for (int64_t len : {0, 1, 3, 5, 8, 13, 64, 1001}) {
        auto shards = partition(len, p, kind).value();
        ASSERT_EQ(shards.size(), static_cast<size_t>(p));
        std::vector<int> seen(len, 0);
        int64_t lo = INT64_MAX, hi = 0;
        for (const Shard& s : shards) {
          EXPECT_TRUE(std::is_sorted(s.positions.begin(), s.positions.end()));
          for (int32_t t : s.positions) {
            ASSERT_TRUE(t >= 0 && t < len);
            ++seen[t];
          }
          lo = std::min(lo, s.size());
          hi = std::max(hi, s.size());
        }
        for (int64_t t = 0; t < len; ++t) EXPECT_EQ(seen[t], 1) << partition_name(kind) << " p " << p << " len " << len;
        EXPECT_LE(hi - lo, kind == PartitionKind::kZigzag ? 2 : 1) << partition_name(kind) << " p " << p << " len " << len;
      }
    }
  }
}

TEST(Partition, ZigzagBalancesCausalWorkContiguousDoesNot) {
  auto work = [](PartitionKind k) {
    auto w = causal_work(partition(100003, 4, k).value());
    return *std::max_element(w.begin(), w.end()) / *std::min_element(w.begin(), w.end());
  };
  EXPECT_LT(work(PartitionKind::kZigzag), 1.001);
  EXPECT_LT(work(PartitionKind::kStriped), 1.001);
  EXPECT_GT(work(PartitionKind::kContiguous), 6.9);  // (2·3 + 1) / 1
  // Zigzag: worker w holds chunks w and 2P-1-w.
  auto z = partition(16, 4, PartitionKind::kZigzag).value();
  EXPECT_EQ(z[0].positions, (std::vector<int32_t>{0, 1, 14, 15}));
  EXPECT_EQ(z[3].positions, (std::vector<int32_t>{6, 7, 8, 9}));
}

TEST(Partition, BadArguments) {
  EXPECT_FALSE(partition(10, 0, PartitionKind::kZigzag).ok());
  EXPECT_FALSE(partition(-1, 2, PartitionKind::kZigzag).ok());
  EXPECT_FALSE(partition(int64_t{1} << 32, 2, PartitionKind::kZigzag).ok());
  EXPECT_EQ(parse_partition("zigzag").value(), PartitionKind::kZigzag);
  auto bad = parse_partition("zig");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "sp_partition must be one of zigzag | contiguous | striped; got 'zig'");
  for (PartitionKind k : enum_values<PartitionKind>()) EXPECT_EQ(parse_partition(partition_name(k)).value(), k);
  EXPECT_EQ(parse_sp_transport("nccl").value(), SpTransport::kNccl);
  EXPECT_EQ(parse_sp_transport("pigeon").status().message(), "sp_transport must be one of host | nccl; got 'pigeon'");
}

}  // namespace
}  // namespace ragd::seqparallel
