// SPDX-License-Identifier: Apache-2.0
// A fixed team of threads that one CPU engine uses to split the work of a
// chunk. run() executes a task function for every task index on the calling
// thread and the workers, handing the indices out through an atomic counter
// (so a preempted thread simply takes fewer), and returns when all are done.
//
// Workers start with the pool (start() returns once they all run) and live
// as long as it does. run() neither
// allocates nor takes a lock: an idle worker spins for a few microseconds
// and then sleeps on a futex (Linux; elsewhere it yields), and the last
// thread to finish wakes the caller the same way. Results never depend on
// which thread ran a task: tasks write disjoint outputs, and workers run with
// subnormals flushed to zero, like the forward pass on the calling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace mega::cpu {

class WorkerPool {
 public:
  // fn(ctx, task, thread): thread in [0, n_threads()) picks per-thread scratch.
  using TaskFn = void (*)(void* ctx, int32_t task, int32_t thread);

  WorkerPool() = default;
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Starts n_threads - 1 workers (the caller is thread 0). False if a thread
  // could not be started (the pool then runs everything on the caller).
  bool start(int32_t n_threads);
  int32_t n_threads() const { return int32_t(workers_.size()) + 1; }

  void run(int32_t n_tasks, TaskFn fn, void* ctx);

  // Convenience: f(task, thread) for any callable, without allocation.
  template <typename F>
  void run(int32_t n_tasks, F& f) {
    run(n_tasks, [](void* c, int32_t task, int32_t thread) { (*static_cast<F*>(c))(task, thread); }, &f);
  }

 private:
  void worker_main(int32_t thread);
  void work(int32_t thread);

  std::vector<std::thread> workers_;
  // the current job, published by the release increment of epoch_
  TaskFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int32_t n_tasks_ = 0;
  std::atomic<int32_t> next_{0};        // next task index to hand out
  std::atomic<uint32_t> epoch_{0};      // bumped once per job (futex word)
  std::atomic<uint32_t> remaining_{0};  // workers still on the job (futex word)
  std::atomic<uint32_t> started_{0};    // workers that have begun to run (futex word)
  std::atomic<bool> stop_{false};
};

}  // namespace mega::cpu
