// SPDX-License-Identifier: Apache-2.0
// See worker_pool.h.
#include "cpu/worker_pool.h"

#include "denormals.h"

#include <climits>
#include <system_error>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace mega::cpu {

namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
              "a futex word must be a plain 32-bit atomic");

// Spin iterations before sleeping: a few tens of microseconds, about the gap
// between two parallel steps of a chunk, so a worker usually catches the next
// step without a system call, yet an idle session costs no CPU.
constexpr int kSpin = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
#else
  (void)word;
  (void)expected;
  std::this_thread::yield();
#endif
}

void futex_wake_all(std::atomic<uint32_t>* word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
#else
  (void)word;
#endif
}

// Returns once word no longer holds value.
void wait_while_equal(std::atomic<uint32_t>& word, uint32_t value) {
  for (int i = 0; i < kSpin; ++i) {
    if (word.load(std::memory_order_acquire) != value) return;
    cpu_relax();
  }
  while (word.load(std::memory_order_acquire) == value) futex_wait(&word, value);
}

}  // namespace

bool WorkerPool::start(int32_t n_threads) {
  if (!workers_.empty()) return false;
  workers_.reserve(size_t(n_threads > 1 ? n_threads - 1 : 0));
  bool ok = true;
  for (int32_t t = 1; t < n_threads && ok; ++t) {
    try {
      workers_.emplace_back(&WorkerPool::worker_main, this, t);
    } catch (const std::system_error&) {
      ok = false;  // the pool keeps the workers it has
    }
  }
  // Return once every worker runs: whatever a new thread sets up (its stack,
  // the C library's per-thread state) is done now, not during the first chunk.
  for (uint32_t n; (n = started_.load(std::memory_order_acquire)) != uint32_t(workers_.size());) {
    wait_while_equal(started_, n);
  }
  return ok;
}

WorkerPool::~WorkerPool() {
  if (workers_.empty()) return;
  stop_.store(true, std::memory_order_relaxed);
  epoch_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&epoch_);
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::work(int32_t thread) {
  for (int32_t task; (task = next_.fetch_add(1, std::memory_order_relaxed)) < n_tasks_;) fn_(ctx_, task, thread);
}

void WorkerPool::worker_main(int32_t thread) {
  // Workers only run forward-pass tasks, which the calling thread runs with
  // subnormals flushed (ScopedFlushDenormals); a worker keeps that mode for
  // its whole life, so a task computes the same bits on any thread.
  const ScopedFlushDenormals ftz;
  started_.fetch_add(1, std::memory_order_release);
  futex_wake_all(&started_);
  uint32_t seen = 0;
  for (;;) {
    wait_while_equal(epoch_, seen);
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_relaxed)) return;
    work(thread);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) futex_wake_all(&remaining_);
  }
}

void WorkerPool::run(int32_t n_tasks, TaskFn fn, void* ctx) {
  if (workers_.empty() || n_tasks <= 1) {
    for (int32_t t = 0; t < n_tasks; ++t) fn(ctx, t, 0);
    return;
  }
  fn_ = fn;
  ctx_ = ctx;
  n_tasks_ = n_tasks;
  next_.store(0, std::memory_order_relaxed);
  remaining_.store(uint32_t(workers_.size()), std::memory_order_relaxed);
  epoch_.fetch_add(1, std::memory_order_release);  // publishes the job
  futex_wake_all(&epoch_);
  work(0);
  for (uint32_t left; (left = remaining_.load(std::memory_order_acquire)) != 0;) wait_while_equal(remaining_, left);
}

}  // namespace mega::cpu
