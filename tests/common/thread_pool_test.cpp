#include "ragd/common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>

namespace ragd {
namespace {

TEST(ThreadPool, RunsAllSubmittedWorkAndStopIsIdempotent) {
  std::atomic<int> sum{0};
  ThreadPool pool(3, 1000);
  int accepted = 0;
  for (int i = 1; i <= 500; ++i)
    if (pool.submit([&sum, i] { sum += i; })) accepted += i;
  pool.stop();
  pool.stop();
  EXPECT_EQ(sum.load(), accepted);
  EXPECT_FALSE(pool.submit([] {}));
}

TEST(ThreadPool, RejectsWhenQueueFull) {
  ThreadPool pool(0, 2);  // no workers: the queue only fills
  EXPECT_TRUE(pool.submit([] {}));
  EXPECT_TRUE(pool.submit([] {}));
  EXPECT_FALSE(pool.submit([] {}));
  EXPECT_EQ(pool.queued(), 2u);
}

}  // namespace
}  // namespace ragd
