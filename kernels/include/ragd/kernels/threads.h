// Threads of the CPU kernels: the thread count shared with OpenBLAS and OpenMP, and the kernels'
// own team (run_team / parallel_for), which the step-path kernels (dense layers, norms, RoPE,
// activations, attention) run on.
//
// Why a team of our own: a small model's decode step is ~40 parallel kernel calls of a few
// microseconds each. OpenMP's threads either sleep between calls (OMP_WAIT_POLICY=passive, ragd's
// default: each call then pays a futex wake-up, ~20 µs here, which made 2-thread decode of the QA
// model's shape 2.1x slower than 1 thread) or spin for a long time after every call (active: a
// loaded machine loses the core). The team's workers spin between calls for a short window
// (RAGD_SPIN_US, default 100 µs: a step's calls follow each other within microseconds, and the
// next step usually starts within it) and then sleep, so a step pays at most one wake-up and an
// idle process holds no core.
//
// Thread-safety: set_num_threads() / num_threads() are per calling thread, as OpenMP's thread
// count is (a thread that steps a model sets its own). run_team() may be called from any thread:
// one caller at a time gets the workers; a concurrent caller, or a call from inside a team task,
// runs its work on its own thread (f(0, 1)), as nested OpenMP regions do. While a job runs, each
// of its threads sees an OpenMP thread count of 1 (as inside an OpenMP parallel region), so
// OpenBLAS or an OpenMP loop called from a task stays on the task's thread.
#pragma once

#include <atomic>
#include <type_traits>
#include <utility>

namespace ragd::kernels {

// n <= 0: leave the OpenMP / OpenBLAS defaults (all cores).
void set_num_threads(int n);
int num_threads();

// The team's task: fn(ctx, id, n) on thread id of n (id 0 is the caller).
using TeamTask = void (*)(void* ctx, int id, int n);

// Runs fn(ctx, id, n) once on each of n threads, n = min(threads, num_threads()) (threads <= 0:
// num_threads()), and returns when all have returned. n = 1, a busy team or a nested call: once,
// on this thread, as fn(ctx, 0, 1).
void run_team_task(int threads, TeamTask fn, void* ctx);

// The same for a callable f(int id, int n).
template <typename F>
void run_team(int threads, F&& f) {
  using Fn = std::remove_reference_t<F>;
  run_team_task(threads, [](void* c, int id, int n) { (*static_cast<Fn*>(c))(id, n); },
                const_cast<void*>(static_cast<const void*>(&f)));
}

// f(begin, end) over a static split of [0, count) into contiguous ranges, one per team thread
// (OpenMP's schedule(static)); on this thread alone when !parallel.
template <typename F>
void parallel_for(int count, bool parallel, F&& f) {
  if (count <= 0) return;
  if (!parallel || count == 1) {
    f(0, count);
    return;
  }
  run_team(0, [&](int id, int n) {
    const int b = static_cast<int>(static_cast<long>(count) * id / n);
    const int e = static_cast<int>(static_cast<long>(count) * (id + 1) / n);
    if (b < e) f(b, e);
  });
}

// f(task) for every task of [0, count), each team thread taking the next untaken task from a
// shared counter (OpenMP's schedule(dynamic, 1): for tasks of unequal cost); on this thread alone
// when !parallel.
template <typename F>
void parallel_tasks(int count, bool parallel, F&& f) {
  if (count <= 0) return;
  if (!parallel || count == 1) {
    for (int t = 0; t < count; ++t) f(t);
    return;
  }
  std::atomic<int> next{0};
  run_team(0, [&](int, int) {
    for (int t; (t = next.fetch_add(1, std::memory_order_relaxed)) < count;) f(t);
  });
}

// The team's spin window in microseconds (RAGD_SPIN_US; read once). Exposed for tests and benches.
int team_spin_us();

}  // namespace ragd::kernels
