// SPDX-License-Identifier: Apache-2.0
// See alloc_counter.h. Without a sanitizer, the allocation functions below
// take the place of glibc's for the whole process (the documented way to
// replace malloc), count, and forward to glibc's own __libc_* entry points.
// AddressSanitizer owns malloc itself, so there the count comes from its
// allocation hook, which also sees operator new.
#include "alloc_counter.h"

#include <malloc.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>

namespace {

std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_count{0};

inline void note_allocation() {
  if (g_counting.load(std::memory_order_relaxed)) g_count.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

namespace mega_alloc {

void set_alloc_counting(bool on) { g_counting.store(on, std::memory_order_seq_cst); }
int64_t alloc_count() { return g_count.load(std::memory_order_seq_cst); }

}  // namespace mega_alloc

#if defined(__SANITIZE_ADDRESS__)

extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, size_t),
                                                         void (*free_hook)(const volatile void*));

namespace {

void on_malloc(const volatile void*, size_t) { note_allocation(); }
void on_free(const volatile void*) {}

[[maybe_unused]] const int g_hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);

}  // namespace

#else

extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t n, size_t size);
void* __libc_realloc(void* p, size_t size);
void* __libc_memalign(size_t alignment, size_t size);
void __libc_free(void* p);

void* malloc(size_t size) noexcept {
  note_allocation();
  return __libc_malloc(size);
}
void* calloc(size_t n, size_t size) noexcept {
  note_allocation();
  return __libc_calloc(n, size);
}
void* realloc(void* p, size_t size) noexcept {
  note_allocation();
  return __libc_realloc(p, size);
}
void* memalign(size_t alignment, size_t size) noexcept {
  note_allocation();
  return __libc_memalign(alignment, size);
}
void* aligned_alloc(size_t alignment, size_t size) noexcept {
  note_allocation();
  return __libc_memalign(alignment, size);
}
int posix_memalign(void** out, size_t alignment, size_t size) noexcept {
  note_allocation();
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(alignment, size);
  if (!p && size != 0) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(size_t size) noexcept {
  note_allocation();
  return __libc_memalign(4096, size);
}
void* pvalloc(size_t size) noexcept {
  note_allocation();
  return __libc_memalign(4096, (size + 4095) & ~size_t(4095));
}
void free(void* p) noexcept { __libc_free(p); }
}

#endif
