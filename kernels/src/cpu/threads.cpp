#include "ragd/kernels/threads.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace ragd::kernels {

namespace {

using Clock = std::chrono::steady_clock;

// Workers the team may hold (a job uses at most num_threads() - 1 of them); a job's thread count,
// at most kMaxWorkers + 1, fits the job word's low 8 bits.
constexpr int kMaxWorkers = 254;

int read_spin_us() {
  const char* v = std::getenv("RAGD_SPIN_US");
  if (v == nullptr || *v == '\0') return 100;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || n < 0) return 100;
  return static_cast<int>(std::min<long>(n, 1000000));
}

// True on the team's workers and on a caller while it runs its own share: kernels called from a
// task run on their thread.
thread_local bool t_in_team = false;

// Sleeping and waking on the job word: the kernel's futex compares the word with `seen` before
// it sleeps, so a job published between the worker's last look and its sleep is not missed.
void futex_wait(std::atomic<uint32_t>* word, uint32_t seen) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
}
void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "the futex word is the atomic's");

// One job at a time. The caller publishes fn / ctx, then the job word (generation << 8 | threads);
// worker i (1-based) takes part when i < threads, and the caller waits until every
// participant has counted itself out of `pending`. Workers that see a new generation while not
// taking part only remember it.
class Team {
 public:
  Team() : spin_(std::chrono::microseconds(team_spin_us())) {}

  void run(int n, TeamTask fn, void* ctx) {
    if (t_in_team || busy_.exchange(true, std::memory_order_acquire)) {
      fn(ctx, 0, 1);
      return;
    }
    n = std::min(n, kMaxWorkers + 1);
    grow(n - 1);
    fn_ = fn;
    ctx_ = ctx;
    pending_.store(n - 1, std::memory_order_relaxed);
    const uint32_t word = ((job_.load(std::memory_order_relaxed) >> 8) + 1) << 8 | static_cast<uint32_t>(n);
    // seq_cst: the store and the sleepers_ load below pair with a worker's sleepers_ increment and
    // its wait's load of job_ (one of the two sides sees the other).
    job_.store(word, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&job_);
    // The caller's share runs as the workers' do: OpenMP's count at 1 (see threads.h).
    const int omp_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    t_in_team = true;
    fn(ctx, 0, n);
    t_in_team = false;
    omp_set_num_threads(omp_threads);
    // The workers are awake (spinning) unless this is the step's first call after a pause; a
    // preempted worker on a loaded machine gets the core back through the yields.
    for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
      if (i < 4096) {
        _mm_pause();
      } else {
        sched_yield();
      }
    }
    busy_.store(false, std::memory_order_release);
  }

 private:
  void grow(int workers) {
    while (static_cast<int>(threads_.size()) < workers) {
      // The worker starts from the word before the job about to be published (it may first look
      // after the caller has published it).
      const int id = static_cast<int>(threads_.size()) + 1;
      const uint32_t seen = job_.load(std::memory_order_relaxed);
      threads_.emplace_back([this, id, seen] { work(id, seen); });
      threads_.back().detach();
    }
  }

  void work(int id, uint32_t seen) {
    t_in_team = true;
    omp_set_num_threads(1);  // OpenBLAS / OpenMP called from a task stays on this thread
    for (;;) {
      uint32_t word;
      Clock::time_point since = Clock::now();
      for (int i = 1; (word = job_.load(std::memory_order_acquire)) == seen; ++i) {
        _mm_pause();
        if (i % 64 == 0 && Clock::now() - since > spin_) {
          sleepers_.fetch_add(1, std::memory_order_seq_cst);
          futex_wait(&job_, seen);
          sleepers_.fetch_sub(1, std::memory_order_relaxed);
          since = Clock::now();
        }
      }
      seen = word;
      const int n = static_cast<int>(word & 0xff);
      if (id < n) {
        fn_(ctx_, id, n);
        pending_.fetch_sub(1, std::memory_order_release);
      }
    }
  }

  const Clock::duration spin_;
  std::atomic<bool> busy_{false};
  std::atomic<uint32_t> job_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> sleepers_{0};
  TeamTask fn_ = nullptr;
  void* ctx_ = nullptr;
  std::vector<std::thread> threads_;  // detached; touched only by the caller holding busy_
};

// The process's team, made on first use and never destroyed (its workers may be blocked at exit).
// A forked child has none of the parent's workers: it starts a team of its own.
std::atomic<Team*> g_team{nullptr};
std::once_flag g_atfork_once;

Team& team() {
  Team* t = g_team.load(std::memory_order_acquire);
  if (t != nullptr) return *t;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  t = g_team.load(std::memory_order_relaxed);
  if (t == nullptr) {
    std::call_once(g_atfork_once, [] {
      pthread_atfork(nullptr, nullptr, [] { g_team.store(nullptr, std::memory_order_release); });
    });
    t = new Team();
    g_team.store(t, std::memory_order_release);
  }
  return *t;
}

}  // namespace

void set_num_threads(int n) {
  if (n <= 0) return;
  omp_set_num_threads(n);
  openblas_set_num_threads(n);
}

int num_threads() { return omp_get_max_threads(); }

int team_spin_us() {
  static const int us = read_spin_us();
  return us;
}

void run_team_task(int threads, TeamTask fn, void* ctx) {
  const int max = num_threads();
  const int n = threads <= 0 ? max : std::min(threads, max);
  if (n <= 1 || t_in_team) {
    fn(ctx, 0, 1);
    return;
  }
  team().run(n, fn, ctx);
}

}  // namespace ragd::kernels
