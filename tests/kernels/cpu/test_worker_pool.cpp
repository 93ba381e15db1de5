// SPDX-License-Identifier: Apache-2.0
// The CPU backend's worker pool: every task runs once, on a valid thread
// index, and tasks on worker threads compute in the same floating-point mode
// as the forward pass on the calling thread (subnormals flushed).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "denormals.h"
#include "cpu/worker_pool.h"

namespace {

using mega::cpu::WorkerPool;

TEST(WorkerPool, RunsEveryTaskOnceOnAValidThread) {
  for (int32_t threads : {1, 2, 3, 4}) {
    WorkerPool pool;
    ASSERT_TRUE(pool.start(threads));
    ASSERT_EQ(pool.n_threads(), threads);
    for (int32_t n_tasks : {0, 1, 2, 7, 64}) {
      std::vector<std::atomic<int32_t>> runs(static_cast<size_t>(n_tasks));
      std::atomic<int32_t> bad_thread{0};
      auto task = [&](int32_t t, int32_t thread) {
        runs[size_t(t)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread.fetch_add(1);
      };
      pool.run(n_tasks, task);
      for (int32_t t = 0; t < n_tasks; ++t) EXPECT_EQ(runs[size_t(t)].load(), 1) << threads << " threads, task " << t;
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

// Many short jobs in a row, some back to back (workers still spinning), some
// after a pause (workers asleep): the hand-over must never lose a job.
TEST(WorkerPool, ManyJobsBackToBackAndAfterSleeping) {
  WorkerPool pool;
  ASSERT_TRUE(pool.start(3));
  std::atomic<int64_t> sum{0};
  auto task = [&](int32_t t, int32_t) { sum.fetch_add(t + 1); };
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 20; ++i) pool.run(5, task);
    if (round % 10 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(sum.load(), 50 * 20 * 15);
}

// A subnormal product: 0 when subnormals are flushed, 1e-40 otherwise.
float tiny_product() {
  volatile float a = 1e-38f, b = 0.01f;
  return a * b;
}

TEST(WorkerPool, WorkersFlushSubnormalsLikeTheCaller) {
  if (tiny_product() == 0.0f) GTEST_SKIP() << "this thread already flushes subnormals";
  WorkerPool pool;
  ASSERT_TRUE(pool.start(2));
  constexpr int32_t n_tasks = 8;
  std::vector<float> result(n_tasks, -1.0f);
  std::vector<int32_t> ran_on(n_tasks, -1);
  std::atomic<int32_t> worker_tasks{0};
  auto task = [&](int32_t t, int32_t thread) {
    if (thread != 0) {
      worker_tasks.fetch_add(1);
    } else {
      // hold the caller until the worker has taken a task (or a second passed),
      // so that both threads really run some
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (worker_tasks.load() == 0 && std::chrono::steady_clock::now() < until) {
      }
    }
    result[size_t(t)] = tiny_product();
    ran_on[size_t(t)] = thread;
  };
  {
    const mega::ScopedFlushDenormals ftz;  // what a CPU engine does around a forward pass
    pool.run(n_tasks, task);
  }
  ASSERT_GT(worker_tasks.load(), 0) << "the worker never ran a task";
  for (int32_t t = 0; t < n_tasks; ++t) EXPECT_EQ(result[size_t(t)], 0.0f) << "task " << t << " on thread " << ran_on[size_t(t)];
  EXPECT_NE(tiny_product(), 0.0f) << "the caller's floating-point mode was not restored";
}

}  // namespace
