// The NCCL transport. Where no CUDA device or no libnccl.so.2 is present (CI, most machines), the
// one thing to check is that asking for it fails on every rank with the reason, and hangs none;
// the rest skips and says why. With one device: a one-rank communicator's collectives. With two
// or more: ring-style exchanges staged from host memory (the CPU engine's KV blocks), posting-order
// matching with the tag check, collectives, and a peer's abort reaching a rank that waits. Device
// buffers (sent in place) are left to the CUDA engine's tests.
#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "ragd/seqparallel/nccl_communicator.h"
#include "ragd/seqparallel/thread_communicator.h"
#include "sp_fixture.h"

namespace ragd::seqparallel {
namespace {

using testing::make_nccl_group;
using testing::run_ranks;

int visible_devices() {
  int n = 0;
  return nccl_available(&n).ok() ? n : 0;
}

#define REQUIRE_NCCL_DEVICES(n)                                                                            \
  do {                                                                                                     \
    int have_ = 0;                                                                                         \
    Status why_ = nccl_available(&have_);                                                                  \
    if (!why_.ok()) GTEST_SKIP() << why_.to_string();                                                      \
    if (have_ < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices for " << (n) << " NCCL ranks, has " << have_; \
  } while (0)

TEST(NcclCommunicator, UnavailableFailsEveryRankWithTheReason) {
  if (visible_devices() > 0) GTEST_SKIP() << "NCCL is usable here: the other tests cover it";
  auto boots = make_thread_group(3).value();
  std::vector<Status> st(3);
  std::vector<std::thread> ts;
  for (int r = 0; r < 3; ++r) {
    ts.emplace_back([&, r] {
      auto c = make_nccl_communicator(std::move(boots[r]));
      st[r] = c.ok() ? Status::OK() : c.status();
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_FALSE(st[r].ok()) << "rank " << r;
    const std::string m = st[r].message();
    EXPECT_TRUE(m.find("CUDA") != std::string::npos || m.find("NCCL") != std::string::npos) << m;
  }
  Status a = nccl_available();
  EXPECT_FALSE(a.ok());
  EXPECT_FALSE(a.message().empty());
}

TEST(NcclCommunicator, OneRankCollectives) {
  REQUIRE_NCCL_DEVICES(1);
  auto comms = make_nccl_group(1);
  ASSERT_TRUE(comms.ok()) << comms.status().to_string();
  Communicator& c = *comms.value()[0];
  EXPECT_EQ(c.transport(), "nccl");
  std::vector<int> mine(37), all(37, -1);
  std::iota(mine.begin(), mine.end(), 5);
  ASSERT_TRUE(c.allgather(mine.data(), sizeof(int) * mine.size(), all.data()).ok());
  EXPECT_EQ(all, mine);
  ASSERT_TRUE(c.broadcast(mine.data(), sizeof(int) * mine.size(), 0).ok());
  EXPECT_TRUE(c.barrier().ok());
  int x = 0;
  EXPECT_FALSE(c.isend(0, 0, &x, 4).ok()) << "a message to itself is refused, as by every transport";
}

TEST(NcclCommunicator, RingExchangeFromHostMemoryThenCollectives) {
  REQUIRE_NCCL_DEVICES(2);
  auto group = make_nccl_group(2);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  auto comms = std::move(group).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    const int r = c.rank(), peer = 1 - r;
    // Ring-style exchange, receive posted first, 3 rounds of odd sizes from host memory.
    for (int round = 0; round < 3; ++round) {
      const size_t n = 1001 + 17 * round;
      std::vector<float> out(n), in(n, -1.f);
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(r * 100000 + round * 1000 + static_cast<int>(i));
      std::vector<Request> reqs;
      RAGD_ASSIGN_OR_RETURN(Request a, c.irecv(peer, 4, in.data(), n * sizeof(float)));
      RAGD_ASSIGN_OR_RETURN(Request b, c.isend(peer, 4, out.data(), n * sizeof(float)));
      reqs.push_back(std::move(a));
      reqs.push_back(std::move(b));
      RAGD_RETURN_IF_ERROR(wait_all(reqs));
      for (size_t i = 0; i < n; ++i) {
        if (in[i] != static_cast<float>(peer * 100000 + round * 1000 + static_cast<int>(i))) return Status::Internal("host payload");
      }
    }
    // Collectives after point to point.
    int mine = 10 + r, all[2] = {0, 0};
    RAGD_RETURN_IF_ERROR(c.allgather(&mine, sizeof mine, all));
    if (all[0] != 10 || all[1] != 11) return Status::Internal("allgather");
    int b = r == 1 ? 77 : 0;
    RAGD_RETURN_IF_ERROR(c.broadcast(&b, sizeof b, 1));
    if (b != 77) return Status::Internal("broadcast");
    return c.barrier();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(NcclCommunicator, AReceiveThatMeetsAnotherTagFailsAndNamesBoth) {
  REQUIRE_NCCL_DEVICES(2);
  auto group = make_nccl_group(2);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  auto comms = std::move(group).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    int v[2] = {1, 2}, w[2] = {0, 0};
    if (c.rank() == 0) {
      RAGD_ASSIGN_OR_RETURN(Request a, c.isend(1, 1, &v[0], 4));
      RAGD_ASSIGN_OR_RETURN(Request b, c.isend(1, 2, &v[1], 4));
      RAGD_RETURN_IF_ERROR(a->wait());
      return b->wait();
    }
    RAGD_ASSIGN_OR_RETURN(Request a, c.irecv(0, 2, &w[1], 4));  // NCCL matches the first send: tag 1
    return a->wait();
  });
  ASSERT_FALSE(st[1].ok());
  EXPECT_NE(st[1].message().find("tag 2"), std::string::npos) << st[1].to_string();
  EXPECT_NE(st[1].message().find("tag 1"), std::string::npos) << st[1].to_string();
}

TEST(NcclCommunicator, APeersAbortReachesAWaitingRank) {
  REQUIRE_NCCL_DEVICES(2);
  auto group = make_nccl_group(2);
  ASSERT_TRUE(group.ok()) << group.status().to_string();
  auto comms = std::move(group).value();
  auto st = run_ranks(comms, [](Communicator& c) -> Status {
    if (c.rank() == 1) return Status::Internal("rank 1 broke");  // run_ranks aborts it
    int x = 0;
    RAGD_ASSIGN_OR_RETURN(Request q, c.irecv(1, 0, &x, 4));  // never sent
    return q->wait();
  });
  ASSERT_FALSE(st[0].ok());
  EXPECT_NE(st[0].message().find("rank 1 broke"), std::string::npos) << st[0].to_string();
}

}  // namespace
}  // namespace ragd::seqparallel
