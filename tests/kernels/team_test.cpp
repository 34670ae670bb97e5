// The kernels' thread team (kernels/threads.h): every thread of a call runs once with its id,
// calls from inside a task and concurrent callers run on their own thread, and no job is lost
// when workers go to sleep between calls (run again with RAGD_SPIN_US=0: every call wakes them).
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>
#include <sys/wait.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "ragd/kernels/threads.h"

namespace ragd::kernels {
namespace {

TEST(Team, EveryThreadRunsOnceWithItsId) {
  for (int want : {2, 3, 5}) {
    set_num_threads(want);
    std::vector<std::atomic<int>> hits(want);
    std::atomic<int> seen_n{0};
    run_team(0, [&](int id, int n) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, n);
      hits[id].fetch_add(1);
      seen_n.store(n);
    });
    EXPECT_EQ(seen_n.load(), want);
    for (int i = 0; i < want; ++i) EXPECT_EQ(hits[i].load(), 1) << "thread " << i << " of " << want;
  }
  set_num_threads(2);
}

TEST(Team, ParallelForCoversEveryIndexOnce) {
  set_num_threads(3);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int count = static_cast<int>(rng() % 37);
    std::vector<int> cover(static_cast<size_t>(count), 0);
    parallel_for(count, trial % 2 == 0, [&](int b, int e) {
      for (int i = b; i < e; ++i) ++cover[i];  // ranges are disjoint: no two threads share an index
    });
    for (int i = 0; i < count; ++i) ASSERT_EQ(cover[i], 1) << "count " << count << " index " << i;
  }
  set_num_threads(2);
}

TEST(Team, ParallelTasksRunsEveryTaskOnce) {
  set_num_threads(3);
  std::mt19937 rng(13);
  for (int trial = 0; trial < 200; ++trial) {
    const int count = static_cast<int>(rng() % 41);
    std::vector<std::atomic<int>> runs(static_cast<size_t>(count));
    parallel_tasks(count, trial % 3 != 0, [&](int t) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, count);
      runs[static_cast<size_t>(t)].fetch_add(1);
    });
    for (int t = 0; t < count; ++t) ASSERT_EQ(runs[static_cast<size_t>(t)].load(), 1) << "count " << count << " task " << t;
  }
  set_num_threads(2);
}

// Inside a job every thread sees OpenMP's thread count at 1, as inside an OpenMP region, so an
// OpenMP loop or OpenBLAS called from a task does not start threads of its own; the caller's
// count is back afterwards.
TEST(Team, TasksSeeOneOpenMpThreadAndTheCallerKeepsItsCount) {
  set_num_threads(2);
  std::atomic<int> inside_max{0}, calls{0};
  run_team(0, [&](int, int n) {
    ASSERT_EQ(n, 2);
    calls.fetch_add(1);
    int m = inside_max.load();
    while (m < omp_get_max_threads() && !inside_max.compare_exchange_weak(m, omp_get_max_threads())) {}
  });
  EXPECT_EQ(calls.load(), 2);
  EXPECT_EQ(inside_max.load(), 1);
  EXPECT_EQ(num_threads(), 2);
}

TEST(Team, NestedCallRunsOnTheCallingThread) {
  set_num_threads(2);
  std::atomic<int> inner_calls{0}, inner_wide{0};
  run_team(0, [&](int, int) {
    run_team(0, [&](int id, int n) {
      inner_calls.fetch_add(1);
      if (n != 1 || id != 0) inner_wide.fetch_add(1);
    });
  });
  EXPECT_EQ(inner_calls.load(), 2);  // once per outer thread
  EXPECT_EQ(inner_wide.load(), 0);
}

TEST(Team, OneThreadRunsInline) {
  set_num_threads(1);
  const auto self = std::this_thread::get_id();
  int calls = 0;
  run_team(0, [&](int id, int n) {
    EXPECT_EQ(id, 0);
    EXPECT_EQ(n, 1);
    EXPECT_EQ(std::this_thread::get_id(), self);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  set_num_threads(2);
}

// Many short jobs from several threads at once, with random pauses so that workers both spin and
// sleep between jobs: every job's sum must be complete. A lost wake-up hangs here (ctest's
// timeout), a torn job word or a reused job gives a wrong sum.
TEST(Team, ConcurrentCallersAndPausesLoseNoWork) {
  constexpr int kCallers = 3, kJobs = 3000, kItems = 64;
  std::atomic<int> wrong{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      set_num_threads(2 + c % 2);
      std::mt19937 rng(100 + c);
      for (int j = 0; j < kJobs; ++j) {
        std::vector<int> v(kItems, 0);
        parallel_for(kItems, true, [&](int b, int e) {
          for (int i = b; i < e; ++i) v[i] = i + j;
        });
        long sum = 0;
        for (int x : v) sum += x;
        if (sum != static_cast<long>(kItems) * (kItems - 1) / 2 + static_cast<long>(kItems) * j) wrong.fetch_add(1);
        if (rng() % 64 == 0) usleep(static_cast<useconds_t>(rng() % 400));
      }
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(wrong.load(), 0);
  set_num_threads(2);
}

TEST(Team, ForkedChildHasAWorkingTeam) {
  set_num_threads(2);
  std::atomic<int> before{0};
  run_team(0, [&](int, int) { before.fetch_add(1); });
  ASSERT_EQ(before.load(), 2);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::atomic<int> hits{0};
    for (int j = 0; j < 100; ++j) run_team(0, [&](int, int) { hits.fetch_add(1); });
    _exit(hits.load() == 200 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace ragd::kernels
