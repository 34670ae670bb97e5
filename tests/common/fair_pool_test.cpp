#include "ragd/common/fair_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace ragd {
namespace {

// A gate tasks wait on until the test opens it.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  void wait() {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return open; });
  }
  void release() {
    std::lock_guard<std::mutex> lk(mu);
    open = true;
    cv.notify_all();
  }
};

TEST(FairPool, RunsAllSubmittedWorkAndStopIsIdempotent) {
  std::atomic<int> sum{0};
  FairPool pool(3, 1000, 0);
  EXPECT_EQ(pool.per_key_running(), 1u);  // auto: threads / 2
  int accepted = 0;
  for (int i = 1; i <= 500; ++i)
    if (pool.submit("k" + std::to_string(i % 7), [&sum, i] { sum += i; })) accepted += i;
  pool.stop();
  pool.stop();
  EXPECT_EQ(sum.load(), accepted);
  EXPECT_EQ(pool.queued(), 0u);
  EXPECT_FALSE(pool.submit("k", [] {}));
}

TEST(FairPool, RejectsWhenQueueFull) {
  Gate gate;
  FairPool pool(1, 2, 1);
  std::atomic<bool> started{false};
  ASSERT_TRUE(pool.submit("a", [&] {
    started = true;
    gate.wait();
  }));
  while (!started) std::this_thread::yield();
  EXPECT_TRUE(pool.submit("a", [] {}));
  EXPECT_TRUE(pool.submit("b", [] {}));
  EXPECT_FALSE(pool.submit("c", [] {}));  // two queued in all
  EXPECT_EQ(pool.queued(), 2u);
  gate.release();
}

// One key's backlog of blocked tasks holds at most its share of the threads: another key's task
// runs while all of them are still blocked, and no more than per_key_running of them run at once.
TEST(FairPool, OneKeysBacklogLeavesThreadsForOthers) {
  Gate gate;
  FairPool pool(3, 100, 2);
  std::atomic<int> running_a{0}, max_running_a{0}, done_a{0};
  for (int i = 0; i < 23; ++i)
    ASSERT_TRUE(pool.submit("flood", [&] {
      const int now = ++running_a;
      int m = max_running_a.load();
      while (now > m && !max_running_a.compare_exchange_weak(m, now)) {}
      gate.wait();
      --running_a;
      ++done_a;
    }));
  std::mutex mu;
  std::condition_variable cv;
  bool b_ran = false;
  ASSERT_TRUE(pool.submit("small", [&] {
    std::lock_guard<std::mutex> lk(mu);
    b_ran = true;
    cv.notify_all();
  }));
  {
    std::unique_lock<std::mutex> lk(mu);
    // Generous: the task needs only a free thread; without fairness it never runs before the gate.
    EXPECT_TRUE(cv.wait_for(lk, std::chrono::seconds(30), [&] { return b_ran; }));
  }
  EXPECT_EQ(done_a.load(), 0);
  gate.release();
  pool.stop();
  EXPECT_EQ(done_a.load(), 23);
  EXPECT_LE(max_running_a.load(), 2);
  EXPECT_GE(max_running_a.load(), 1);
}

// Turns go round the keys with queued work, one task each, in the order the keys became ready.
TEST(FairPool, KeysTakeTurns) {
  Gate gate;
  FairPool pool(1, 100, 1);
  std::mutex mu;
  std::vector<std::string> order;
  std::atomic<bool> started{false};
  ASSERT_TRUE(pool.submit("a", [&] {
    started = true;
    gate.wait();
  }));
  while (!started) std::this_thread::yield();
  auto rec = [&](std::string s) {
    return [&mu, &order, s] {
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(s);
    };
  };
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(pool.submit("a", rec("a" + std::to_string(i))));
  ASSERT_TRUE(pool.submit("b", rec("b1")));
  ASSERT_TRUE(pool.submit("b", rec("b2")));
  ASSERT_TRUE(pool.submit("c", rec("c1")));
  gate.release();
  pool.stop();
  const std::vector<std::string> want = {"b1", "c1", "a1", "b2", "a2", "a3"};
  EXPECT_EQ(order, want);
}

}  // namespace
}  // namespace ragd
