// SPDX-License-Identifier: Apache-2.0
// The stand-in's kernel execution: every block of a grid in a seeded random
// order, every thread of a block as a cooperative fiber. A fiber runs until it
// finishes, reaches __syncthreads() or waits in a warp shuffle; the scheduler
// then runs the other runnable fibers, in a fresh random order each round.
//   - __syncthreads(): released when every thread of the block waits there; a
//     barrier that some thread cannot reach (it returned, or waits in a
//     shuffle) is a deadlock.
//   - shuffles: lanes of a 32-lane warp; each lane named in the mask must
//     arrive with the same mask; the value is exchanged when all have arrived.
// A fault ends the launch (the remaining fibers are abandoned) and becomes
// the launch's sticky error (runtime.cpp).
#include <sys/mman.h>

#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_runtime.h"
#include "standin_internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define MEGA_STANDIN_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MEGA_STANDIN_ASAN 1
#endif
#endif
#ifdef MEGA_STANDIN_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace cuda_standin {

namespace {

#if defined(__x86_64__)
// Saves the callee-saved registers and the stack pointer in *from_sp, then
// resumes the context saved at to_sp. (The SSE and x87 control words are the
// OS thread's: fibers never change them.)
extern "C" void mega_standin_switch(void** from_sp, void* to_sp);
asm(R"(
.text
.globl mega_standin_switch
.type mega_standin_switch, @function
mega_standin_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size mega_standin_switch, .-mega_standin_switch
)");
#endif

enum class State { ready, barrier, shuffle, done };

struct Fiber {
  State state = State::ready;
  uint8_t* stack = nullptr;  // lowest usable address
  size_t stack_size = 0;
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t ctx;
#endif
  void* asan_fake = nullptr;
  // warp exchange
  unsigned mask = 0;
  uint64_t value = 0, result = 0;
  int32_t src = 0, width = 32, kind = 0;
  bool result_ready = false;
  ThreadContext tc;
};

// Lanes of one warp waiting in one exchange (its mask), not all there yet.
struct WarpGroup {
  unsigned mask = 0;
  int32_t arrived = 0;
};

// splitmix64: the thread and block order (cheap, and the same everywhere).
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[size_t(next() % i)]);
  }
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<std::vector<WarpGroup>> warps;  // per warp: its open exchanges
  std::vector<int32_t> next;                  // runnable in the next round
  int32_t at_barrier = 0, finished = 0;
  KernelCall* call = nullptr;
  int32_t current = -1;
#if defined(__x86_64__)
  void* sched_sp = nullptr;
#else
  ucontext_t sched_ctx;
#endif
  const void* sched_stack_bottom = nullptr;
  size_t sched_stack_size = 0;
  void* sched_fake = nullptr;
  std::string fault;
};

thread_local Block* t_block = nullptr;
thread_local ThreadContext t_plain;  // outside kernels
thread_local ThreadContext* t_ctx = &t_plain;

// Stacks, kept per OS thread and reused by every launch.
struct StackPool {
  uint8_t* base = nullptr;
  size_t count = 0;
  ~StackPool() {
    if (base) munmap(base, count * kSlot);
  }
#ifdef MEGA_STANDIN_ASAN
  static constexpr size_t kStack = size_t(512) << 10;
#else
  static constexpr size_t kStack = size_t(32) << 10;
#endif
  static constexpr size_t kGuard = 4096;
  static constexpr size_t kSlot = kStack + kGuard;
  bool reserve(size_t n) {
    if (n <= count) return true;
    if (base) munmap(base, count * kSlot);
    base = nullptr;
    count = 0;
    void* p = mmap(nullptr, n * kSlot, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    base = static_cast<uint8_t*>(p);
    count = n;
    for (size_t i = 0; i < n; ++i) mprotect(base + i * kSlot, kGuard, PROT_NONE);  // overflow guard
    return true;
  }
  uint8_t* stack(size_t i) const { return base + i * kSlot + kGuard; }
  // The stacks' tops are kSlot apart, a multiple of the page size: left at
  // the top, every fiber's frames would share the same few cache sets. Each
  // stack gives up a different slice of its top instead.
  static size_t color(size_t i) { return (i * 1088) % 8192; }
};
thread_local StackPool t_stacks;

void switch_to_scheduler(Fiber& f, bool finished) {
  Block& b = *t_block;
#ifdef MEGA_STANDIN_ASAN
  __sanitizer_start_switch_fiber(finished ? nullptr : &f.asan_fake, b.sched_stack_bottom, b.sched_stack_size);
#endif
#if defined(__x86_64__)
  mega_standin_switch(&f.sp, b.sched_sp);
#else
  swapcontext(&f.ctx, &b.sched_ctx);
#endif
#ifdef MEGA_STANDIN_ASAN
  __sanitizer_finish_switch_fiber(f.asan_fake, nullptr, nullptr);
#endif
  (void)finished;
}

[[noreturn]] void fiber_main() {
  Block& b = *t_block;
  Fiber& f = b.fibers[size_t(b.current)];
#ifdef MEGA_STANDIN_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &b.sched_stack_bottom, &b.sched_stack_size);
#endif
  b.call->run_thread();
  f.state = State::done;
  ++b.finished;
  switch_to_scheduler(f, true);
  std::abort();  // a finished fiber is never resumed
}

#if !defined(__x86_64__)
void fiber_main_c() { fiber_main(); }
#endif

void start_fiber(Fiber& f) {
#if defined(__x86_64__)
  // The frame mega_standin_switch pops: six registers, then it "returns"
  // into fiber_main with the stack aligned as after a call.
  uintptr_t top = reinterpret_cast<uintptr_t>(f.stack + f.stack_size) & ~uintptr_t(15);
  auto* w = reinterpret_cast<uint64_t*>(top);
  w[-1] = 0;  // fiber_main's return address (it never returns)
  w[-2] = reinterpret_cast<uint64_t>(&fiber_main);
  for (int i = 3; i <= 8; ++i) w[-i] = 0;
  f.sp = &w[-8];
#else
  getcontext(&f.ctx);
  f.ctx.uc_stack.ss_sp = f.stack;
  f.ctx.uc_stack.ss_size = f.stack_size;
  f.ctx.uc_link = nullptr;
  makecontext(&f.ctx, fiber_main_c, 0);
#endif
}

void resume(Block& b, int32_t i) {
  Fiber& f = b.fibers[size_t(i)];
  b.current = i;
  t_ctx = &f.tc;
#ifdef MEGA_STANDIN_ASAN
  __sanitizer_start_switch_fiber(&b.sched_fake, f.stack, f.stack_size);
#endif
#if defined(__x86_64__)
  mega_standin_switch(&b.sched_sp, f.sp);
#else
  swapcontext(&b.sched_ctx, &f.ctx);
#endif
#ifdef MEGA_STANDIN_ASAN
  __sanitizer_finish_switch_fiber(b.sched_fake, nullptr, nullptr);
#endif
  b.current = -1;
  t_ctx = &t_plain;
}

std::string describe(const Fiber& f) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "thread (%u,%u,%u) of block (%u,%u,%u)", f.tc.thread_idx.x, f.tc.thread_idx.y,
                f.tc.thread_idx.z, f.tc.block_idx.x, f.tc.block_idx.y, f.tc.block_idx.z);
  return buf;
}

// A fault found inside a fiber: record it and leave the block for good.
[[noreturn]] void fault_in_fiber(const std::string& what) {
  Block& b = *t_block;
  Fiber& f = b.fibers[size_t(b.current)];
  if (b.fault.empty()) b.fault = what;
  f.state = State::done;
  ++b.finished;
  switch_to_scheduler(f, true);
  std::abort();
}

int32_t popcount32(unsigned v) {
  v = v - ((v >> 1) & 0x55555555u);
  v = (v & 0x33333333u) + ((v >> 2) & 0x33333333u);
  return int32_t((((v + (v >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24);
}

// Lane `me` arrives in an exchange of its warp. When every lane of its mask
// is there, computes every lane's result, makes the others runnable and
// returns true (the caller goes on without yielding). A fault: b.fault set.
bool arrive(Block& b, Fiber& me, int32_t warp_first) {
  const unsigned mask = me.mask;
  std::vector<WarpGroup>& open = b.warps[size_t(warp_first / 32)];
  WarpGroup* g = nullptr;
  for (WarpGroup& o : open) {
    if (o.mask == mask) {
      g = &o;
    } else if (o.mask & mask) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "warp shuffle: lanes arrive with different masks (0x%08x and 0x%08x)", mask,
                    o.mask);
      b.fault = buf + std::string(" at ") + describe(me);
      return false;
    }
  }
  if (!g) {
    const int32_t n_threads = int32_t(b.fibers.size());
    for (int32_t lane = 0; lane < 32; ++lane) {
      if ((mask >> lane & 1u) && warp_first + lane >= n_threads) {
        b.fault = "warp shuffle mask names lane " + std::to_string(lane) + ", past the block's last thread";
        return false;
      }
    }
    open.push_back(WarpGroup{mask, 0});
    g = &open.back();
  }
  if (++g->arrived < popcount32(mask)) return true;
  for (int32_t lane = 0; lane < 32; ++lane) {
    if (!(mask >> lane & 1u)) continue;
    Fiber& o = b.fibers[size_t(warp_first + lane)];
    const int32_t w = o.width;  // a power of two
    const int32_t seg = lane & ~(w - 1);
    int32_t src = lane;
    switch (o.kind) {
      case kShflIdx: src = seg + (o.src & (w - 1)); break;
      case kShflXor: src = lane ^ o.src; if (src >= seg + w) src = lane; break;
      case kShflDown: src = lane + o.src; if (src >= seg + w) src = lane; break;
      case kShflUp: src = lane - o.src; if (src < seg) src = lane; break;
    }
    if (src < 0 || src > 31 || !(mask >> src & 1u)) {
      b.fault = "warp shuffle: lane " + std::to_string(lane) + " reads lane " + std::to_string(src) +
                ", which is not in the mask";
      return false;
    }
    o.result = b.fibers[size_t(warp_first + src)].value;
  }
  for (int32_t lane = 0; lane < 32; ++lane) {
    if (!(mask >> lane & 1u)) continue;
    Fiber& o = b.fibers[size_t(warp_first + lane)];
    o.result_ready = true;
    if (&o != &me) b.next.push_back(warp_first + lane);
  }
  *g = open.back();
  open.pop_back();
  return true;
}

}  // namespace

ThreadContext& this_thread() { return *t_ctx; }

void syncthreads() {
  Block* b = t_block;
  if (!b || b->current < 0) return;  // host code
  Fiber& f = b->fibers[size_t(b->current)];
  f.state = State::barrier;
  ++b->at_barrier;
  switch_to_scheduler(f, false);
}

uint64_t shuffle(unsigned mask, uint64_t bits, int32_t src_lane, int32_t width, int kind) {
  Block* b = t_block;
  if (!b || b->current < 0) return bits;
  Fiber& f = b->fibers[size_t(b->current)];
  const int32_t lane = f.tc.linear % 32;
  if (width <= 0 || width > 32 || (width & (width - 1)) != 0) {
    fault_in_fiber("warp shuffle width " + std::to_string(width) + " is not a power of two <= 32");
  }
  if (!(mask >> lane & 1u)) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "warp shuffle: lane %d calls it with mask 0x%08x, which leaves it out", lane, mask);
    fault_in_fiber(buf + std::string(" at ") + describe(f));
  }
  f.mask = mask;
  f.value = bits;
  f.src = src_lane;
  f.width = width;
  f.kind = kind;
  f.result_ready = false;
  f.state = State::shuffle;
  if (!arrive(*b, f, f.tc.linear - lane)) fault_in_fiber(b->fault);
  if (!f.result_ready) switch_to_scheduler(f, false);  // resumed once the exchange is done
  f.state = State::ready;
  f.result_ready = false;
  return f.result;
}

// Runs one launch on the calling OS thread. Returns "" or the fault.
std::string run_grid(KernelCall* call, dim3 grid, dim3 block, uint64_t seed) {
  const int64_t n_blocks = int64_t(grid.x) * grid.y * grid.z;
  const int32_t n_threads = int32_t(block.x * block.y * block.z);
  if (!t_stacks.reserve(size_t(n_threads))) return "out of memory for the stand-in's fiber stacks";
  Rng rng{seed};
  std::vector<int64_t> order(static_cast<size_t>(n_blocks));
  for (int64_t i = 0; i < n_blocks; ++i) order[size_t(i)] = i;
  rng.shuffle(order);

  Block b;
  b.call = call;
  b.fibers.resize(size_t(n_threads));
  b.warps.resize(size_t((n_threads + 31) / 32));
  std::vector<int32_t> round;
  round.reserve(size_t(n_threads));
  b.next.reserve(size_t(n_threads));
  Block* outer = t_block;
  t_block = &b;
  for (int64_t bi : order) {
    const uint3 bidx{unsigned(bi % grid.x), unsigned(bi / grid.x % grid.y), unsigned(bi / (int64_t(grid.x) * grid.y))};
    b.next.clear();
    b.at_barrier = b.finished = 0;
    for (auto& w : b.warps) w.clear();
    for (int32_t t = 0; t < n_threads; ++t) {
      Fiber& f = b.fibers[size_t(t)];
      f.state = State::ready;
      f.result_ready = false;
      f.asan_fake = nullptr;
      f.stack = t_stacks.stack(size_t(t));
      f.stack_size = StackPool::kStack - StackPool::color(size_t(t));
#ifdef MEGA_STANDIN_ASAN
      __asan_unpoison_memory_region(f.stack, f.stack_size);  // left poisoned by an earlier fiber
#endif
      f.tc.thread_idx = uint3{unsigned(t % int32_t(block.x)), unsigned(t / int32_t(block.x) % int32_t(block.y)),
                              unsigned(t / int32_t(block.x * block.y))};
      f.tc.block_idx = bidx;
      f.tc.block_dim = block;
      f.tc.grid_dim = grid;
      f.tc.linear = t;
      start_fiber(f);
      b.next.push_back(t);
    }
    for (;;) {
      if (b.next.empty()) {
        if (b.finished == n_threads) break;
        if (b.at_barrier == n_threads) {  // everyone is at the barrier: release it
          b.at_barrier = 0;
          for (int32_t t = 0; t < n_threads; ++t) {
            b.fibers[size_t(t)].state = State::ready;
            b.next.push_back(t);
          }
          continue;
        }
        // no thread can move: say who waits where
        std::string who;
        int32_t waiting = 0;
        for (int32_t t = 0; t < n_threads; ++t) {
          const Fiber& f = b.fibers[size_t(t)];
          if (f.state == State::shuffle) ++waiting;
          if (!who.empty()) continue;
          if (f.state == State::barrier) who = describe(f) + " waits at __syncthreads()";
          if (f.state == State::shuffle) who = describe(f) + " waits in a warp shuffle";
        }
        b.fault = "deadlock: " + who + " (" + std::to_string(b.at_barrier) + " at the barrier, " +
                  std::to_string(waiting) + " in shuffles, " + std::to_string(b.finished) + " returned, of " +
                  std::to_string(n_threads) + ")";
        break;
      }
      round.swap(b.next);
      b.next.clear();
      rng.shuffle(round);
      for (int32_t t : round) {
        resume(b, t);
        if (!b.fault.empty()) break;
      }
      if (!b.fault.empty()) break;
    }
    if (!b.fault.empty()) break;
  }
  t_block = outer;
  return b.fault;
}

}  // namespace cuda_standin
